//! Building the corpus of recorded sequences (`recorded.jsonl`) from the request logs of the
//! project's suites (the fake server's recording mode, `KOPF_FAKE_APISERVER_RECORD`).
//!
//! Each log is one server's session. A session becomes a sequence that can be replayed in a
//! namespace of its own beside others on one real server:
//! - namespaces are renamed into the sequence's (`default` is `{{ns}}`, another `{{ns}}-x`),
//!   the groups of the CRDs it creates get the sequence's word in front (`{{u}}.kopf.dev`),
//!   and the cluster-scoped objects it creates too (`{{u}}-name`);
//! - the values each server makes up become lookups into what the replay has seen on that
//!   server: an object's resourceVersion and uid (`{{@rv}}`, `{{@uid}}`, `{{@uid:PATH}}` for
//!   an owner), a collection's latest version and continue token (`{{@list-rv}}`,
//!   `{{@continue}}`);
//! - a request repeated back to back (a test waiting for something) becomes one poll until the
//!   code the recording saw last; a watch is read until it is quiet.
//!
//! Left out, and counted by why: requests an injected fault answered or cut, protobuf bodies,
//! discovery and OpenAPI documents (the real server serves many more resources), webhook
//! configurations (their servers were the recorded tests' own), requests refused for their
//! credentials (the replay is the admin's), and lists of built-in resources across
//! namespaces (they would see the other sequences' objects).
//!
//! Sessions are kept only for the request shapes they add (method, path with names
//! normalised, query keys, body keys, the code), up to their last new shape.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

/// A namespace named in a selector (`metadata.namespace=x`, `!=`, `==`): renamed as paths are.
static NAMESPACE_SELECTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"metadata\.namespace(==?|!=)([a-z0-9-]+)").expect("a valid regex")
});

/// The most steps a recorded sequence keeps, and the corpus in all.
const MAX_STEPS_PER_SEQUENCE: usize = 40;
const MAX_STEPS: usize = 1200;

/// The largest body a recorded request keeps (the limits tests send megabytes).
const MAX_BODY: usize = 8 * 1024;

/// Built-in kinds whose owner references the replay can follow: kind → (API prefix, plural).
const OWNER_KINDS: &[(&str, &str, &str)] = &[
    ("ConfigMap", "/api/v1", "configmaps"),
    ("Secret", "/api/v1", "secrets"),
    ("Pod", "/api/v1", "pods"),
    ("Service", "/api/v1", "services"),
    ("ServiceAccount", "/api/v1", "serviceaccounts"),
    ("Deployment", "/apis/apps/v1", "deployments"),
    ("ReplicaSet", "/apis/apps/v1", "replicasets"),
    ("StatefulSet", "/apis/apps/v1", "statefulsets"),
    ("Job", "/apis/batch/v1", "jobs"),
];

/// Built-in resources that are not namespaced.
const CLUSTER_SCOPED: &[&str] = &[
    "namespaces",
    "nodes",
    "persistentvolumes",
    "clusterroles",
    "clusterrolebindings",
    "customresourcedefinitions",
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "priorityclasses",
    "storageclasses",
    "csidrivers",
    "csinodes",
    "volumeattachments",
    "apiservices",
    "certificatesigningrequests",
    "ingressclasses",
    "runtimeclasses",
    "componentstatuses",
];

/// The reviews: cluster-scoped, created and answered, never stored.
const REVIEWS: &[&str] = &[
    "selfsubjectreviews",
    "selfsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "subjectaccessreviews",
    "tokenreviews",
];

/// Cluster-scoped kinds whose objects a session may create under names of its own (renamed).
const RENAMED_CLUSTER_SCOPED: &[&str] = &[
    "clusterroles",
    "clusterrolebindings",
    "nodes",
    "priorityclasses",
];

/// One request of a log.
#[derive(Debug, Clone)]
struct Logged {
    method: String,
    path: String,
    query: String,
    content_type: Option<String>,
    body: Option<Value>,
    text: Option<String>,
    code: u64,
}

/// A path parsed: `/api/v1` or `/apis/GROUP/VERSION`, then the resource.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourcePath {
    pub(crate) prefix: String,
    pub(crate) namespace: Option<String>,
    pub(crate) plural: String,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
    /// The legacy `/watch/` segment was there.
    pub(crate) watch: bool,
}

impl ResourcePath {
    pub(crate) fn parse(path: &str) -> Option<ResourcePath> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let (prefix, mut rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => (format!("/api/{version}"), rest),
            ["apis", group, version, rest @ ..] => (format!("/apis/{group}/{version}"), rest),
            _ => return None,
        };
        let watch = rest.first() == Some(&"watch");
        if watch {
            rest = &rest[1..];
        }
        let (namespace, rest) = match rest {
            ["namespaces", ns] => {
                return Some(ResourcePath {
                    prefix,
                    namespace: None,
                    plural: "namespaces".into(),
                    name: Some(ns.to_string()),
                    subresource: None,
                    watch,
                });
            }
            ["namespaces", ns, "finalize" | "status"] => {
                return Some(ResourcePath {
                    prefix,
                    namespace: None,
                    plural: "namespaces".into(),
                    name: Some(ns.to_string()),
                    subresource: Some(rest[2].to_string()),
                    watch,
                });
            }
            ["namespaces", ns, rest @ ..] => (Some(ns.to_string()), rest),
            rest => (None, rest),
        };
        let plural = rest.first()?.to_string();
        Some(ResourcePath {
            prefix,
            namespace,
            plural,
            name: rest.get(1).map(|s| s.to_string()),
            subresource: (rest.len() > 2).then(|| rest[2..].join("/")),
            watch,
        })
    }

    /// The collection the path lists: without name, subresource and `/watch/`.
    pub(crate) fn collection(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/namespaces/{ns}/{}", self.prefix, self.plural),
            None => format!("{}/{}", self.prefix, self.plural),
        }
    }

    /// The object the path names (its subresources are the object's), if any.
    pub(crate) fn object(&self) -> Option<String> {
        let name = self.name.as_ref()?;
        if self.plural == "namespaces" && self.namespace.is_none() {
            return Some(format!("{}/namespaces/{name}", self.prefix));
        }
        Some(format!("{}/{name}", self.collection()))
    }
}

/// What a build found: the sequences (as the JSON lines of the corpus) and what it left out.
pub(crate) struct Built {
    pub(crate) sequences: Vec<Value>,
    pub(crate) left_out: BTreeMap<String, usize>,
    pub(crate) sessions: usize,
    pub(crate) requests: usize,
}

/// Builds the corpus from every `*.jsonl` log under `folder` (and its subfolders).
pub(crate) fn build(folder: &Path) -> Built {
    let mut logs = Vec::new();
    collect(folder, &mut logs);
    logs.sort();
    // Taken in turns from each suite's folder, so that every suite is in the corpus.
    let mut by_folder: BTreeMap<
        std::path::PathBuf,
        std::collections::VecDeque<std::path::PathBuf>,
    > = BTreeMap::new();
    for log in logs {
        let parent = log.parent().map(Path::to_path_buf).unwrap_or_default();
        by_folder.entry(parent).or_default().push_back(log);
    }
    let mut logs = Vec::new();
    while by_folder.values().any(|q| !q.is_empty()) {
        for queue in by_folder.values_mut() {
            logs.extend(queue.pop_front());
        }
    }
    let mut built = Built {
        sequences: Vec::new(),
        left_out: BTreeMap::new(),
        sessions: 0,
        requests: 0,
    };
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut total = 0;
    for log in logs {
        let Ok(text) = std::fs::read_to_string(&log) else {
            continue;
        };
        let mut lines = text.lines();
        let session = lines
            .next()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .and_then(|v| v["session"].as_str().map(String::from))
            .unwrap_or_else(|| "unnamed".into());
        let requests: Vec<Logged> = lines.filter_map(parse_line).collect();
        built.sessions += 1;
        built.requests += requests.len();
        let Some(sequence) = replayable(&session, &requests, &mut built.left_out) else {
            continue;
        };
        // Kept only for what it adds, up to the last request that adds something.
        let steps = sequence["steps"].as_array().cloned().unwrap_or_default();
        let shapes: Vec<String> = steps.iter().map(shape).collect();
        let last_new = shapes.iter().rposition(|s| !seen.contains(s));
        let Some(last_new) = last_new else {
            continue;
        };
        let keep = (last_new + 1).min(MAX_STEPS_PER_SEQUENCE);
        if total + keep > MAX_STEPS {
            *built
                .left_out
                .entry("beyond the corpus' size".into())
                .or_default() += keep;
            continue;
        }
        total += keep;
        seen.extend(shapes.into_iter().take(keep));
        let mut sequence = sequence;
        sequence["steps"] = Value::Array(steps.into_iter().take(keep).collect());
        let mut name = format!("recorded/{}", slug(&session));
        let mut n = 2;
        while !names.insert(name.clone()) {
            name = format!("recorded/{}-{n}", slug(&session));
            n += 1;
        }
        sequence["name"] = name.into();
        built.sequences.push(sequence);
    }
    built
}

fn collect(folder: &Path, logs: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, logs);
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            logs.push(path);
        }
    }
}

fn parse_line(line: &str) -> Option<Logged> {
    let value: Value = serde_json::from_str(line).ok()?;
    let faulted = value["faults"].as_array().is_some_and(|f| !f.is_empty());
    Some(Logged {
        method: value["method"].as_str()?.to_string(),
        path: value["path"].as_str()?.to_string(),
        query: value["query"].as_str().unwrap_or_default().to_string(),
        content_type: value["headers"]["content-type"].as_str().map(String::from),
        body: value["body"].get("json").cloned(),
        text: value["body"]
            .get("text")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| {
                value["body"]
                    .get("base64")
                    .map(|_| "\u{0}protobuf".to_string())
            }),
        // A fault's answer or cut is no answer of the server: marked as code 0.
        code: if faulted {
            0
        } else {
            value["code"].as_u64().unwrap_or(0)
        },
    })
}

/// A short name for a session (a test's name).
fn slug(session: &str) -> String {
    let slug: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let slug = slug
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    slug.chars().take(60).collect()
}

/// The session as a sequence to replay, or `None` when nothing of it is.
fn replayable(
    session: &str,
    requests: &[Logged],
    left_out: &mut BTreeMap<String, usize>,
) -> Option<Value> {
    let mut leave = |why: &str| *left_out.entry(why.to_string()).or_default() += 1;
    // What the session creates: CRDs (their groups and scopes), namespaces, cluster-scoped
    // objects.
    let mut groups: BTreeSet<String> = BTreeSet::new();
    let mut custom: HashMap<String, (String, bool)> = HashMap::new(); // plural → (prefix, namespaced)
    let mut kinds: HashMap<String, (String, String)> = HashMap::new(); // kind → (prefix, plural)
    let mut created_namespaces: BTreeSet<String> = BTreeSet::new();
    let mut cluster_names: BTreeSet<String> = BTreeSet::new();
    for request in requests {
        let Some(path) = ResourcePath::parse(&request.path) else {
            continue;
        };
        let body = request.body.as_ref();
        let name = body
            .and_then(|b| b["metadata"]["name"].as_str())
            .map(String::from);
        if path.plural == "customresourcedefinitions"
            && let Some(spec) = body.map(|b| &b["spec"])
            && let Some(group) = spec["group"].as_str()
        {
            groups.insert(group.to_string());
            let plural = spec["names"]["plural"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let version = spec["versions"][0]["name"].as_str().unwrap_or("v1");
            let prefix = format!("/apis/{group}/{version}");
            custom.insert(plural.clone(), (prefix.clone(), spec["scope"] != "Cluster"));
            if let Some(kind) = spec["names"]["kind"].as_str() {
                kinds.insert(kind.to_string(), (prefix, plural));
            }
        }
        if path.plural == "namespaces"
            && request.method == "POST"
            && let Some(name) = &name
        {
            created_namespaces.insert(name.clone());
        }
        if RENAMED_CLUSTER_SCOPED.contains(&path.plural.as_str())
            && matches!(request.method.as_str(), "POST" | "PUT" | "PATCH")
            && let Some(name) = name.or(path.name.clone())
        {
            cluster_names.insert(name);
        }
    }
    for (kind, prefix, plural) in OWNER_KINDS {
        kinds
            .entry(kind.to_string())
            .or_insert((prefix.to_string(), plural.to_string()));
    }
    let renames = Renames::new(&groups, &cluster_names);
    let mut namespaces: BTreeSet<String> = BTreeSet::new();
    let mut steps: Vec<Value> = Vec::new();
    let mut last: Option<(String, u64)> = None;
    for request in requests {
        if request.code == 0 {
            leave("answered or cut by an injected fault");
            continue;
        }
        if request
            .text
            .as_deref()
            .is_some_and(|t| t.starts_with('\u{0}'))
        {
            leave("protobuf bodies");
            continue;
        }
        let size = request.body.as_ref().map_or(0, |b| b.to_string().len())
            + request.text.as_ref().map_or(0, String::len);
        if size > MAX_BODY {
            leave("bodies larger than 8 KiB (the limits tests')");
            continue;
        }
        if matches!(request.code, 401 | 403) {
            leave("refused for their credentials (the replay is the admin's)");
            continue;
        }
        let Some(path) = ResourcePath::parse(&request.path) else {
            if request.path.starts_with("/openapi") {
                leave("OpenAPI documents");
            } else if request.path == "/version" || request.path.ends_with("z") {
                leave("version and health checks");
            } else {
                leave("discovery documents");
            }
            continue;
        };
        if path.plural.is_empty() || (path.name.is_none() && path.plural.contains('.')) {
            leave("discovery documents");
            continue;
        }
        if path.plural.ends_with("webhookconfigurations") {
            leave("webhook configurations (their servers were the recorded tests')");
            continue;
        }
        let namespaced = custom
            .get(&path.plural)
            .map(|(_, namespaced)| *namespaced)
            .unwrap_or(
                !CLUSTER_SCOPED.contains(&path.plural.as_str())
                    && !REVIEWS.contains(&path.plural.as_str()),
            );
        let custom_resource = custom.contains_key(&path.plural);
        let listing = request.method == "GET" && path.name.is_none();
        let by_name =
            request.query.contains("metadata.name%3D") || request.query.contains("metadata.name=");
        if listing && !custom_resource && (path.namespace.is_none() && (namespaced || !by_name)) {
            leave("lists and watches of built-in resources across namespaces");
            continue;
        }
        let renamed = custom_resource
            || RENAMED_CLUSTER_SCOPED.contains(&path.plural.as_str())
            || REVIEWS.contains(&path.plural.as_str())
            || matches!(
                path.plural.as_str(),
                "namespaces" | "customresourcedefinitions"
            );
        if !namespaced
            && !renamed
            && matches!(request.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
        {
            leave("writes of cluster-scoped objects the replay does not rename");
            continue;
        }
        for ns in path.namespace.iter().chain(
            (path.plural == "namespaces")
                .then_some(())
                .and(path.name.as_ref()),
        ) {
            namespaces.insert(ns.clone());
        }
        if request.query.contains("object.metadata.uid") {
            leave("shard selectors by uid (each server's uids fall into other shards)");
            continue;
        }
        let watch = path.watch || query_flag(&request.query, "watch");
        let mut step = json!({
            "method": request.method,
            "path": renames.path(&request.path, &path),
            "code": request.code,
        });
        let query = renames.query(&request.query, watch);
        if !query.is_empty() {
            step["path"] = format!("{}?{query}", step["path"].as_str().unwrap_or_default()).into();
        }
        if let Some(content_type) = &request.content_type {
            step["content_type"] = content_type.clone().into();
        }
        if let Some(body) = &request.body {
            if let Some(ns) = body["metadata"]["namespace"].as_str() {
                namespaces.insert(ns.to_string());
            }
            let mut body = renames.body(body, &path);
            templated_body(&mut body, &path, &kinds, &renames);
            step["body"] = json!({"json": body});
        } else if let Some(text) = &request.text {
            step["body"] = json!({"text": renames.text(text)});
        }
        step["kind"] = if watch { "watch" } else { "send" }.into();
        // A request repeated back to back: one poll until the code seen last.
        let key = format!("{}", json!([step["method"], step["path"], step["body"]]));
        if let Some((previous, _)) = &last
            && *previous == key
            && !watch
            && let Some(polled) = steps.last_mut()
        {
            polled["kind"] = "poll".into();
            polled["code"] = request.code.into();
            continue;
        }
        last = Some((key, request.code));
        step["label"] = format!(
            "{:03}-{}-{}",
            steps.len() + 1,
            request.method.to_ascii_lowercase(),
            path.plural
        )
        .into();
        // A CRD created: the real server serves its resource only once it is established.
        let established = (path.plural == "customresourcedefinitions" && request.code == 201)
            .then(|| {
                step["body"]["json"]["metadata"]["name"]
                    .as_str()
                    .map(String::from)
            })
            .flatten();
        steps.push(step);
        if let Some(crd) = established {
            steps.push(json!({"kind": "established", "crd": crd}));
        }
    }
    if steps.is_empty() {
        return None;
    }
    // The namespaces the session uses but does not create are made before it runs.
    let extra: Vec<Value> = namespaces
        .iter()
        .filter(|ns| !created_namespaces.contains(*ns) && *ns != "default")
        .map(|ns| Value::String(rename_namespace(ns)))
        .collect();
    Some(json!({"session": session, "namespaces": extra, "steps": steps}))
}

fn query_flag(query: &str, key: &str) -> bool {
    form_urlencoded::parse(query.as_bytes())
        .any(|(k, v)| k == key && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The sequence's own name for a recorded namespace.
fn rename_namespace(ns: &str) -> String {
    if ns == "default" {
        "{{ns}}".into()
    } else {
        let short: String = ns.chars().take(28).collect();
        format!("{{{{ns}}}}-{}", short.trim_end_matches('-'))
    }
}

/// The renames of a session: CRD groups and cluster-scoped names.
struct Renames {
    groups: Option<Regex>,
    cluster_names: BTreeSet<String>,
}

impl Renames {
    fn new(groups: &BTreeSet<String>, cluster_names: &BTreeSet<String>) -> Renames {
        let mut groups: Vec<&String> = groups.iter().collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
        let groups = (!groups.is_empty()).then(|| {
            let alternatives: Vec<String> = groups.iter().map(|g| regex::escape(g)).collect();
            Regex::new(&alternatives.join("|")).expect("a valid regex")
        });
        Renames {
            groups,
            cluster_names: cluster_names.clone(),
        }
    }

    /// A text with the session's groups renamed, where they stand as whole names (not within
    /// a longer word: `notkopf.dev` is not `kopf.dev`).
    fn text(&self, text: &str) -> String {
        let Some(groups) = &self.groups else {
            return text.to_string();
        };
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
        let mut out = String::with_capacity(text.len());
        let mut from = 0;
        for found in groups.find_iter(text) {
            let before = text[..found.start()].chars().next_back();
            let after = text[found.end()..].chars().next();
            if word(before) || word(after) {
                continue;
            }
            out.push_str(&text[from..found.start()]);
            out.push_str("{{u}}.");
            out.push_str(found.as_str());
            from = found.end();
        }
        out.push_str(&text[from..]);
        out
    }

    fn path(&self, raw: &str, path: &ResourcePath) -> String {
        let mut segments: Vec<String> = raw.split('/').map(String::from).collect();
        for i in 0..segments.len() {
            if i > 0 && segments[i - 1] == "namespaces" {
                segments[i] = rename_namespace(&segments[i]);
            }
        }
        if RENAMED_CLUSTER_SCOPED.contains(&path.plural.as_str())
            && let Some(name) = &path.name
            && self.cluster_names.contains(name)
            && let Some(last) = segments.iter_mut().rev().find(|s| *s == name)
        {
            *last = format!("{{{{u}}}}-{name}");
        }
        self.text(&segments.join("/"))
    }

    /// The query, its versions and continue tokens made lookups, its namespaces renamed.
    fn query(&self, raw: &str, watch: bool) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        let mut templated = Vec::new();
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            match key.as_ref() {
                "resourceVersion" if !value.is_empty() && value != "0" => {
                    templated.push("resourceVersion={{@list-rv}}".to_string());
                }
                "continue" if !value.is_empty() => templated.push("continue={{@continue}}".into()),
                // Each recorded watch is read until it is quiet; a long timeout is no use.
                "timeoutSeconds" if watch => {}
                "fieldSelector" | "labelSelector" => {
                    let value = NAMESPACE_SELECTED
                        .replace_all(&value, |c: &regex::Captures<'_>| {
                            format!("metadata.namespace{}{}", &c[1], rename_namespace(&c[2]))
                        })
                        .into_owned();
                    out.append_pair(&key, &self.text(&value));
                }
                _ => {
                    out.append_pair(&key, &self.text(&value));
                }
            }
        }
        let mut query = out.finish();
        // The templates go in unencoded, to be filled in before sending.
        for pair in templated {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str(&pair);
        }
        query
            .replace("%7B%7Bns%7D%7D", "{{ns}}")
            .replace("%7B%7Bu%7D%7D", "{{u}}")
    }

    /// A body with namespaces, groups and cluster-scoped names renamed.
    fn body(&self, body: &Value, path: &ResourcePath) -> Value {
        let mut body = rename_values(body, &|key, value| match key {
            "namespace" => Some(rename_namespace(value)),
            _ => None,
        });
        if path.plural == "namespaces"
            && let Some(name) = body["metadata"]["name"].as_str()
        {
            body["metadata"]["name"] = rename_namespace(name).into();
        }
        let renamed_cluster = |name: &str| format!("{{{{u}}}}-{name}");
        if RENAMED_CLUSTER_SCOPED.contains(&path.plural.as_str())
            && let Some(name) = body["metadata"]["name"].as_str()
            && self.cluster_names.contains(name)
        {
            body["metadata"]["name"] = renamed_cluster(name).into();
        }
        if body["roleRef"]["kind"] == "ClusterRole"
            && let Some(name) = body["roleRef"]["name"].as_str()
            && self.cluster_names.contains(name)
        {
            body["roleRef"]["name"] = renamed_cluster(name).into();
        }
        if let Some(node) = body["spec"]["nodeName"].as_str()
            && self.cluster_names.contains(node)
        {
            body["spec"]["nodeName"] = renamed_cluster(node).into();
        }
        rename_all(&body, &|text| self.text(text))
    }
}

/// `value` with the strings under keys that `rename` renames replaced.
fn rename_values(value: &Value, rename: &dyn Fn(&str, &str) -> Option<String>) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match v.as_str().and_then(|text| rename(k, text)) {
                        Some(renamed) => Value::String(renamed),
                        None => rename_values(v, rename),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| rename_values(i, rename)).collect())
        }
        other => other.clone(),
    }
}

/// `value` with every string and key passed through `rename`.
fn rename_all(value: &Value, rename: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (rename(k), rename_all(v, rename)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| rename_all(i, rename)).collect()),
        Value::String(text) => Value::String(rename(text)),
        other => other.clone(),
    }
}

/// The values of a body that each server makes up, made lookups: the target's
/// resourceVersion and uid, owners' uids, DeleteOptions' preconditions, a JSON patch's `test`
/// of the resourceVersion.
fn templated_body(
    body: &mut Value,
    path: &ResourcePath,
    kinds: &HashMap<String, (String, String)>,
    renames: &Renames,
) {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
        {
            meta.insert("resourceVersion".into(), "{{@rv}}".into());
        }
        if meta
            .get("uid")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
        {
            meta.insert("uid".into(), "{{@uid}}".into());
        }
        let namespace = path.namespace.as_deref().map(rename_namespace);
        for owner in meta
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let kind = owner["kind"].as_str().unwrap_or_default();
            let name = owner["name"].as_str().unwrap_or_default();
            if let Some((prefix, plural)) = kinds.get(kind) {
                let prefix = renames.text(prefix);
                let owner_path = match &namespace {
                    Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}/{name}"),
                    None => format!("{prefix}/{plural}/{name}"),
                };
                owner["uid"] = format!("{{{{@uid:{owner_path}}}}}").into();
            }
        }
    }
    // An Event's object: its uid is the replay's own too.
    let namespace = path.namespace.as_deref().map(rename_namespace);
    for key in ["involvedObject", "regarding"] {
        let Some(object) = body.get_mut(key).filter(|o| o["uid"].is_string()) else {
            continue;
        };
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["name"].as_str().unwrap_or_default();
        let namespace = object["namespace"]
            .as_str()
            .map(String::from)
            .or(namespace.clone());
        if let Some((prefix, plural)) = kinds.get(kind) {
            let prefix = renames.text(prefix);
            let at = match &namespace {
                Some(ns) => format!("{prefix}/namespaces/{ns}/{plural}/{name}"),
                None => format!("{prefix}/{plural}/{name}"),
            };
            object["uid"] = format!("{{{{@uid:{at}}}}}").into();
        }
    }
    if let Some(preconditions) = body.get_mut("preconditions").and_then(Value::as_object_mut) {
        if preconditions.contains_key("uid") {
            preconditions.insert("uid".into(), "{{@uid}}".into());
        }
        if preconditions.contains_key("resourceVersion") {
            preconditions.insert("resourceVersion".into(), "{{@rv}}".into());
        }
    }
    for operation in body.as_array_mut().into_iter().flatten() {
        if operation["path"] == "/metadata/resourceVersion" && operation["value"].is_string() {
            operation["value"] = "{{@rv}}".into();
        }
    }
}

/// A request's shape, for deduplication: its method, path with names left out, query keys,
/// content type, body keys, and code.
fn shape(step: &Value) -> String {
    if step["kind"] == "established" {
        return format!("established {}", step["crd"]);
    }
    let path = step["path"].as_str().unwrap_or_default();
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let resource = ResourcePath::parse(path);
    let path_shape = match &resource {
        Some(r) => format!(
            "{}/{}{}{}{}",
            Regex::new(r"[a-z0-9-]+\.\{\{u\}\}\.|\{\{u\}\}\.")
                .expect("a valid regex")
                .replace_all(&r.prefix, ""),
            if r.namespace.is_some() { "ns/" } else { "" },
            r.plural,
            if r.name.is_some() { "/name" } else { "" },
            r.subresource
                .as_deref()
                .map(|s| format!("/{s}"))
                .unwrap_or_default()
        ),
        None => path.to_string(),
    };
    let mut keys: Vec<String> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| match k.as_ref() {
            "watch"
            | "dryRun"
            | "propagationPolicy"
            | "fieldValidation"
            | "force"
            | "allowWatchBookmarks"
            | "sendInitialEvents" => format!("{k}={v}"),
            _ => k.into_owned(),
        })
        .collect();
    keys.sort();
    let body = match step["body"].get("json") {
        Some(body) => keys_of(body),
        None => step["body"]
            .get("text")
            .map(|_| "text".to_string())
            .unwrap_or_default(),
    };
    format!(
        "{} {path_shape} {} {} {} {}",
        step["method"].as_str().unwrap_or_default(),
        keys.join("&"),
        step["content_type"].as_str().unwrap_or_default(),
        body,
        step["code"]
    )
}

/// The keys of a body, nested, sorted; arrays by their first item.
fn keys_of(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<String> = map
                .iter()
                // Label and annotation keys are data, not shape.
                .map(|(k, v)| match k.as_str() {
                    "labels" | "annotations" | "data" | "stringData" | "binaryData" => k.clone(),
                    _ => format!("{k}:{}", keys_of(v)),
                })
                .collect();
            keys.sort();
            format!("{{{}}}", keys.join(","))
        }
        Value::Array(items) => format!("[{}]", items.first().map(keys_of).unwrap_or_default()),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_into_collections_and_objects() {
        let p = ResourcePath::parse("/api/v1/namespaces/ns/configmaps/a").unwrap();
        assert_eq!(p.collection(), "/api/v1/namespaces/ns/configmaps");
        assert_eq!(
            p.object().as_deref(),
            Some("/api/v1/namespaces/ns/configmaps/a")
        );
        let p = ResourcePath::parse("/apis/kopf.dev/v1/watch/namespaces/ns/kopfexamples").unwrap();
        assert!(p.watch);
        assert_eq!(
            p.collection(),
            "/apis/kopf.dev/v1/namespaces/ns/kopfexamples"
        );
        let p = ResourcePath::parse("/api/v1/namespaces/ns").unwrap();
        assert_eq!(p.object().as_deref(), Some("/api/v1/namespaces/ns"));
        let p = ResourcePath::parse("/apis/kopf.dev/v1/namespaces/ns/kex/a/status").unwrap();
        assert_eq!(
            p.object().as_deref(),
            Some("/apis/kopf.dev/v1/namespaces/ns/kex/a")
        );
        assert_eq!(p.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn groups_namespaces_and_versions_are_renamed() {
        let groups = BTreeSet::from(["kopf.dev".to_string()]);
        let renames = Renames::new(&groups, &BTreeSet::new());
        let raw = "/apis/kopf.dev/v1/namespaces/other/kopfexamples";
        let path = ResourcePath::parse(raw).unwrap();
        assert_eq!(
            renames.path(raw, &path),
            "/apis/{{u}}.kopf.dev/v1/namespaces/{{ns}}-other/kopfexamples"
        );
        assert_eq!(
            renames.text("kopfexamples.kopf.dev"),
            "kopfexamples.{{u}}.kopf.dev"
        );
        assert_eq!(renames.text("notkopf.dev"), "notkopf.dev");
        assert_eq!(
            renames.query("watch=true&resourceVersion=17&timeoutSeconds=60", true),
            "watch=true&resourceVersion={{@list-rv}}"
        );
    }
}
