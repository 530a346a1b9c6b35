#!/usr/bin/env python3
"""Generates the protobuf decoding schemas of the fake API server from Kubernetes' own Go types.

Regenerate (from the repository root, with git mirrors of k8s.io/api and k8s.io/apimachinery):

    python3 scripts/protobuf-schemas.py \
        --api /work/.mirror/kubernetes+api/repo \
        --apimachinery /work/.mirror/kubernetes+apimachinery/repo

It reads the Go structs of the kinds listed in KINDS below and of every message they reach (from
the `HEAD` commit of each mirror, no work tree needed), and writes one Rust module per Go package
under kopf-testing/fake-apiserver/src/semantics/protobuf/generated/, plus generated/mod.rs with the
table of kinds. The output is formatted with rustfmt.

How a Go field becomes a schema field (see schema.rs):
- the protobuf tag gives the field number, the JSON tag the name; fields without a protobuf tag
  (TypeMeta) are not on the wire and are left out;
- `[]T` is `rep`; a pointer, a map, a struct, or a scalar without `omitempty` is `keep`; a
  non-pointer scalar with `omitempty` is `omit`;
- an embedded struct whose JSON tag gives no name (`json:",inline"`, `json:""`) is `Inline`, as
  Go's JSON encoder promotes its fields;
- Go named types are resolved to what they stand for (`type ConcurrencyPolicy string` is a string,
  `type ResourceList map[ResourceName]resource.Quantity` a quantity map);
- well-known apimachinery types map to their dedicated kinds (Time, MicroTime, IntOrString,
  Quantity), and the messages already described by hand (ObjectMeta, LabelSelector, the pod
  template...) are reused rather than generated;
- a field whose type the decoder cannot express is left out, with a comment saying why.
"""

import argparse
import os
import re
import subprocess
import sys

# The kinds to decode: (apiVersion, Go import path, Go type name).
KINDS = [
    ("batch/v1", "k8s.io/api/batch/v1", "Job"),
    ("batch/v1", "k8s.io/api/batch/v1", "CronJob"),
    ("rbac.authorization.k8s.io/v1", "k8s.io/api/rbac/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "k8s.io/api/rbac/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "k8s.io/api/rbac/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "k8s.io/api/rbac/v1", "ClusterRoleBinding"),
    ("authorization.k8s.io/v1", "k8s.io/api/authorization/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "k8s.io/api/authorization/v1", "SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "k8s.io/api/authorization/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "k8s.io/api/authorization/v1", "LocalSubjectAccessReview"),
    ("authentication.k8s.io/v1", "k8s.io/api/authentication/v1", "SelfSubjectReview"),
    ("authentication.k8s.io/v1", "k8s.io/api/authentication/v1", "TokenReview"),
    ("authentication.k8s.io/v1", "k8s.io/api/authentication/v1", "TokenRequest"),
    ("policy/v1", "k8s.io/api/policy/v1", "PodDisruptionBudget"),
    ("policy/v1", "k8s.io/api/policy/v1", "Eviction"),
    ("scheduling.k8s.io/v1", "k8s.io/api/scheduling/v1", "PriorityClass"),
    ("v1", "k8s.io/api/core/v1", "ResourceQuota"),
    ("v1", "k8s.io/api/core/v1", "Binding"),
    ("networking.k8s.io/v1", "k8s.io/api/networking/v1", "Ingress"),
    ("apps/v1", "k8s.io/api/apps/v1", "Deployment"),
    ("apps/v1", "k8s.io/api/apps/v1", "ReplicaSet"),
    ("apps/v1", "k8s.io/api/apps/v1", "StatefulSet"),
    ("apps/v1", "k8s.io/api/apps/v1", "DaemonSet"),
    ("coordination.k8s.io/v1", "k8s.io/api/coordination/v1", "Lease"),
]

META = "k8s.io/apimachinery/pkg/apis/meta/v1"
CORE = "k8s.io/api/core/v1"

# Go types decoded by a dedicated schema Kind.
SPECIAL = {
    (META, "Time"): "Kind::Time",
    (META, "MicroTime"): "Kind::MicroTime",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "Kind::IntOrString",
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "Kind::Quantity",
}

# Messages described by hand: (Go package, Go type) -> (Rust module path, static).
HAND_WRITTEN = {
    (META, "ObjectMeta"): ("super::super::meta", "OBJECT_META"),
    (META, "OwnerReference"): ("super::super::meta", "OWNER_REFERENCE"),
    (META, "ManagedFieldsEntry"): ("super::super::meta", "MANAGED_FIELDS_ENTRY"),
    (META, "LabelSelector"): ("super::super::meta", "LABEL_SELECTOR"),
    (META, "LabelSelectorRequirement"): ("super::super::meta", "LABEL_SELECTOR_REQUIREMENT"),
    (CORE, "ObjectReference"): ("super::super::core", "OBJECT_REFERENCE"),
    (CORE, "LocalObjectReference"): ("super::super::core", "LOCAL_OBJECT_REFERENCE"),
    (CORE, "PodTemplateSpec"): ("super::super::pod", "POD_TEMPLATE_SPEC"),
    (CORE, "ResourceRequirements"): ("super::super::pod", "RESOURCE_REQUIREMENTS"),
}

SCALARS = {"string": "Str", "bool": "Bool", "int32": "Int32", "int64": "Int64"}

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(
    HERE, "..", "kopf-testing", "fake-apiserver", "src", "semantics", "protobuf", "generated"
)


class Unsupported(Exception):
    """A Go type that the decoder cannot express."""


class GoStruct:
    """A parsed Go struct: its fields as (go name or None, go type, json tag, protobuf tag)."""

    def __init__(self, package, name, fields, imports):
        self.package, self.name, self.fields, self.imports = package, name, fields, imports


class GoSources:
    """The Go packages of the mirrors, parsed lazily: structs and named types per package."""

    def __init__(self, mirrors):
        self.mirrors = mirrors  # import path prefix -> git dir
        self.packages = {}
        self.commits = {}

    def git(self, prefix, *args):
        return subprocess.run(
            ["git", "-C", self.mirrors[prefix], *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def package(self, path):
        if path in self.packages:
            return self.packages[path]
        prefix = next((p for p in self.mirrors if path.startswith(p + "/")), None)
        if prefix is None:
            raise Unsupported(f"package {path} is not mirrored")
        self.commits.setdefault(prefix, self.git(prefix, "rev-parse", "HEAD").strip())
        directory = path[len(prefix) + 1 :]
        names = self.git(prefix, "ls-tree", "--name-only", "HEAD", directory + "/").split()
        types = {}
        for name in names:
            base = os.path.basename(name)
            if not base.endswith(".go") or base.endswith("_test.go"):
                continue
            if "generated" in base or base.startswith("zz_"):
                continue
            parse_file(path, self.git(prefix, "show", f"HEAD:{name}"), types)
        self.packages[path] = types
        return types

    def lookup(self, package, name):
        types = self.package(package)
        if name not in types:
            raise Unsupported(f"type {name} not found in {package}")
        return types[name]


IMPORT_LINE = re.compile(r'^\s*(?:(\w+)\s+)?"([^"]+)"\s*$')
FIELD_LINE = re.compile(r"^\s*(?:(\w+)\s+)?(\S+)\s+`([^`]*)`")


def parse_file(package, text, types):
    """Collects the structs and named types of one Go file into `types`."""
    imports = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("import ("):
            i += 1
            while not lines[i].startswith(")"):
                m = IMPORT_LINE.match(lines[i])
                if m:
                    imports[m.group(1) or m.group(2).split("/")[-1]] = m.group(2)
                i += 1
        elif line.startswith("import "):
            m = IMPORT_LINE.match(line[len("import ") :])
            if m:
                imports[m.group(1) or m.group(2).split("/")[-1]] = m.group(2)
        m = re.match(r"^type (\w+) struct \{\s*$", line)
        if m:
            fields = []
            i += 1
            while not lines[i].startswith("}"):
                body = lines[i].strip()
                if body and not body.startswith("//"):
                    f = FIELD_LINE.match(lines[i])
                    if f:
                        fields.append((f.group(1), f.group(2), tag(f.group(3), "json"), tag(f.group(3), "protobuf")))
                i += 1
            types[m.group(1)] = GoStruct(package, m.group(1), fields, imports)
        else:
            m = re.match(r"^type (\w+) =?\s*(\S+)\s*(?://.*)?$", line)
            if m:
                types[m.group(1)] = (m.group(2), imports)
        i += 1


def tag(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.upper()


def module_of(package):
    """The Rust module of a Go package: k8s.io/api/batch/v1 -> batch_v1."""
    group, version = package.split("/")[-2:]
    return f"{group}_{version}"


class Generator:
    """Walks the Go types from the kinds and renders the reached structs as Rust schemas."""

    def __init__(self, sources):
        self.sources = sources
        self.modules = {}  # rust module -> {static: rendered}, in discovery order
        self.queue = []
        self.seen = set()

    def message(self, package, name, current_module):
        """The Rust expression of a `&'static Schema` for a Go struct, queueing it if needed."""
        key = (package, name)
        if key in HAND_WRITTEN:
            path, static = HAND_WRITTEN[key]
            self.uses(current_module).add((path, static))
            return static
        if key not in self.seen:
            self.seen.add(key)
            self.queue.append(key)
        module = module_of(package)
        if module != current_module:
            self.uses(current_module).add((f"super::{module}", snake(name)))
        return snake(name)

    def uses(self, module):
        return self.modules.setdefault(module, {"uses": set(), "statics": []})["uses"]

    def resolve(self, package, go_type, imports):
        """Resolves a Go type to (shape, kind), shape one of scalar/message/map/list/bytes."""
        if go_type.startswith("*"):
            go_type = go_type[1:]
        if go_type == "[]byte":
            raise Unsupported("[]byte is not decoded")
        if go_type.startswith("[]"):
            shape, kind = self.resolve(package, go_type[2:], imports)
            if shape in ("list", "map", "bytes"):
                raise Unsupported(f"a list of {go_type[2:]} is not decoded")
            return "list", kind
        m = re.match(r"^map\[([\w.]+)\](.+)$", go_type)
        if m:
            key_shape, key_kind = self.resolve(package, m.group(1), imports)
            if key_kind != "Str":
                raise Unsupported(f"map keys of {m.group(1)} are not decoded")
            return "map", self.map_kind(package, m.group(2), imports)
        if go_type in SCALARS:
            return "scalar", SCALARS[go_type]
        if "." in go_type:
            alias, name = go_type.split(".", 1)
            if alias not in imports:
                raise Unsupported(f"unknown import {alias}")
            package = imports[alias]
        else:
            name = go_type
        if (package, name) in SPECIAL:
            return "special", SPECIAL[(package, name)]
        if (package, name) in HAND_WRITTEN:
            return "message", (package, name)
        found = self.sources.lookup(package, name)
        if isinstance(found, GoStruct):
            return "message", (package, name)
        underlying, file_imports = found
        return self.resolve(package, underlying, file_imports)

    def map_kind(self, package, value_type, imports):
        if value_type == "[]byte":
            return "Kind::BytesMap"
        shape, kind = self.resolve(package, value_type, imports)
        if shape == "scalar" and kind == "Str":
            return "Kind::StringMap"
        if kind == "Kind::Quantity":
            return "Kind::QuantityMap"
        if shape == "list" and kind == "Str":
            return "Kind::StringListMap"
        raise Unsupported(f"map values of {value_type} are not decoded")

    def render(self, package, name):
        struct = self.sources.lookup(package, name)
        module = module_of(package)
        lines = []
        for go_name, go_type, json_tag, proto_tag in struct.fields:
            if not proto_tag or proto_tag == "-" or json_tag == "-":
                continue
            parts = proto_tag.split(",")
            number = int(parts[1])
            proto_name = next(p[5:] for p in parts if p.startswith("name="))
            json_parts = (json_tag or "").split(",")
            # Go's JSON encoder inlines an embedded struct whose tag gives no name.
            inline = go_name is None and not json_parts[0]
            json_name = json_parts[0] or go_name or proto_name
            omitempty = "omitempty" in json_parts[1:]
            pointer = go_type.startswith("*")
            try:
                shape, kind = self.resolve(package, go_type, struct.imports)
            except Unsupported as why:
                lines.append(f"    // {json_name} ({number}) is skipped: {why}.")
                continue
            if shape == "message":
                target = self.message(*kind, module)
                kind = f"Inline(&{target})" if inline else f"Message(&{target})"
                field_name = proto_name if inline else json_name
                lines.append(f'    keep({number}, "{field_name}", {kind}),')
                continue
            if shape == "list":
                if isinstance(kind, tuple):
                    kind = f"Message(&{self.message(*kind, module)})"
                lines.append(f'    rep({number}, "{json_name}", {kind}),')
                continue
            card = "omit" if shape == "scalar" and omitempty and not pointer else "keep"
            lines.append(f'    {card}({number}, "{json_name}", {kind}),')
        static = snake(name)
        body = "\n".join(lines)
        rendered = (
            f"/// {module.replace('_', '/')} {name}.\n"
            f"pub(crate) static {static}: Schema = Schema {{\n"
            f'    name: "{name}",\n'
            f"    fields: &[\n{body}\n    ],\n"
            f"}};\n"
        )
        self.modules.setdefault(module, {"uses": set(), "statics": []})["statics"].append(rendered)

    def run(self):
        for _, package, name in KINDS:
            self.message(package, name, module_of(package))
        while self.queue:
            self.render(*self.queue.pop(0))


def write(generator, sources):
    os.makedirs(OUT_DIR, exist_ok=True)
    commits = "".join(f"// - {prefix} {commit}\n" for prefix, commit in sorted(sources.commits.items()))
    header = (
        "// @generated by scripts/protobuf-schemas.py (do not edit by hand) from the Go types of\n"
        + commits
    )
    written = []
    for module, content in sorted(generator.modules.items()):
        statics = "\n".join(content["statics"])
        used = [k for k in ("Kind", "Bool", "Inline", "Int32", "Int64", "Message") if re.search(rf"\b{k}\b", statics)]
        used += ["String as Str"] if re.search(r"\bStr\b", statics) else []
        uses = []
        if used:
            uses.append(f"use super::super::schema::Kind::{{{', '.join(used)}}};".replace("{Kind", "{self"))
        cards = [c for c in ("keep", "omit", "rep") if re.search(rf"\b{c}\(", statics)]
        uses.append(f"use super::super::schema::{{{', '.join(['Schema', *cards])}}};")
        by_path = {}
        for path, static in content["uses"]:
            by_path.setdefault(path, set()).add(static)
        for path in sorted(by_path):
            uses.append(f"use {path}::{{{', '.join(sorted(by_path[path]))}}};")
        text = (
            header
            + f"\n//! The schemas of `{module.replace('_', '/')}` messages reached from the decodable kinds.\n\n"
            + "\n".join(uses)
            + "\n\n"
            + statics
        )
        path = os.path.join(OUT_DIR, f"{module}.rs")
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    modules = "\n".join(f"mod {m};" for m in sorted(generator.modules))
    kinds = "\n".join(
        f'    ("{api_version}", "{name}", &{module_of(package)}::{snake(name)}),'
        for api_version, package, name in KINDS
    )
    mod_rs = (
        header
        + "\n//! Schemas generated from the Go types of `k8s.io/api`, one module per API group version.\n\n"
        + modules
        + "\n\nuse super::schema::Schema;\n\n"
        + "/// The generated decodable kinds: (apiVersion, kind, schema).\n"
        + f"pub(crate) static KINDS: &[(&str, &str, &Schema)] = &[\n{kinds}\n];\n"
    )
    path = os.path.join(OUT_DIR, "mod.rs")
    with open(path, "w") as f:
        f.write(mod_rs)
    written.append(path)
    subprocess.run(["rustfmt", "--edition", "2024", *written], check=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", required=True, help="git dir of a k8s.io/api mirror")
    parser.add_argument("--apimachinery", required=True, help="git dir of a k8s.io/apimachinery mirror")
    args = parser.parse_args()
    sources = GoSources({"k8s.io/api": args.api, "k8s.io/apimachinery": args.apimachinery})
    generator = Generator(sources)
    generator.run()
    write(generator, sources)


if __name__ == "__main__":
    sys.exit(main())
