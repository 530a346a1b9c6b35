//! The checks of a CRD's rules when it is written: their fields, then that they compile.

use serde_json::Value;

use super::super::keywords::{
    Additional, EMBEDDED, MAX_DEPTH, additional, is_true, items_schema, props,
};
use super::program::{CompileError, Expected, compile};
use super::rule::RuleSpec;
use super::tree::{VALIDATIONS, rule_entries};
use crate::semantics::go_format::{go_quote, go_value};

/// Checks the rules of a schema as the apiserver does when a CRD is written: the rules'
/// fields, then (where those are fine) that each rule and message expression compiles.
/// Problems read as [`check_structural`](super::super::check_structural)'s do (`<path>: <detail>`), with `base` the
/// path of the `openAPIV3Schema` itself, e.g. `spec.validation.openAPIV3Schema`.
pub(crate) fn check_rules(schema: &Value, base: &str) -> Vec<String> {
    let mut out = Vec::new();
    let root = Place {
        path: base.to_string(),
        resource_root: true,
        uncorrelatable: None,
    };
    check_node(schema, &root, &mut out, 0);
    out
}

/// Where a schema node sits, for the checks of its rules.
struct Place {
    /// The node's path.
    path: String,
    /// Whether the node is a resource's root.
    resource_root: bool,
    /// The highest list above the node whose items cannot be matched with their old values
    /// (not of list type map), where `oldSelf` is forbidden.
    uncorrelatable: Option<String>,
}

impl Place {
    fn child(&self, segment: &str, schema: &Value) -> Place {
        Place {
            path: format!("{}{segment}", self.path),
            resource_root: is_true(schema, EMBEDDED),
            uncorrelatable: self.uncorrelatable.clone(),
        }
    }
}

fn check_node(schema: &Value, place: &Place, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let path = &place.path;
    if let Some(entries) = schema.get(VALIDATIONS) {
        if !entries.is_array() {
            out.push(format!(
                "{path}.{VALIDATIONS}: Invalid value: {}: must be a list of rules",
                go_value(entries)
            ));
        }
        let specs: Vec<RuleSpec> = rule_entries(schema).map(RuleSpec::parse).collect();
        let mut field_problems = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            field_problems.extend(spec.check(schema, &format!("{path}.{VALIDATIONS}[{i}]")));
        }
        let clean = field_problems.is_empty();
        out.extend(field_problems);
        if clean {
            for (i, spec) in specs.iter().enumerate() {
                check_compiles(spec, schema, place, i, out);
            }
        }
    }
    if let Some(items) = items_schema(schema) {
        let mut child = place.child(".items", items);
        let map_list = schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
        if !map_list && child.uncorrelatable.is_none() {
            child.uncorrelatable = Some(path.clone());
        }
        check_node(items, &child, out, depth + 1);
    }
    for (key, property) in props(schema).into_iter().flatten() {
        let child = place.child(&format!(".properties[{key}]"), property);
        check_node(property, &child, out, depth + 1);
    }
    if let Additional::Schema(values) = additional(schema) {
        let child = place.child(".additionalProperties", values);
        check_node(values, &child, out, depth + 1);
    }
}

/// The compilation problems of the `index`th rule of a node.
fn check_compiles(
    spec: &RuleSpec,
    schema: &Value,
    place: &Place,
    index: usize,
    out: &mut Vec<String>,
) {
    let path = format!("{}.{VALIDATIONS}[{index}]", place.path);
    let shown = spec.go_syntax();
    let mut uses_old_self = false;
    if !spec.rule.trim().is_empty() {
        match compile(&spec.rule, schema, place.resource_root, Expected::Bool) {
            Ok(program) => uses_old_self = program.uses_old_self,
            Err(CompileError::Issues(issues)) => out.push(format!(
                "{path}.rule: Invalid value: {shown}: compilation failed: {issues}"
            )),
            Err(CompileError::WrongType) => out.push(format!(
                "{path}.rule: Invalid value: {shown}: cel expression must evaluate to a bool"
            )),
        }
    }
    if !spec.message_expression.trim().is_empty() {
        match compile(&spec.message_expression, schema, place.resource_root, Expected::String) {
            Ok(_) => {}
            Err(CompileError::Issues(issues)) => out.push(format!(
                "{path}.messageExpression: Invalid value: {shown}: messageExpression compilation failed: {issues}"
            )),
            Err(CompileError::WrongType) => out.push(format!(
                "{path}.messageExpression: Invalid value: {shown}: messageExpression must evaluate to a string"
            )),
        }
    }
    if uses_old_self {
        if let Some(within) = &place.uncorrelatable {
            out.push(format!(
                "{path}.rule: Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {within}",
                go_quote(&spec.rule)
            ));
        }
    } else if let Some(optional) = spec.optional_old_self {
        out.push(format!(
            "{path}.optionalOldSelf: Invalid value: {optional}: may not be set if oldSelf is not used in rule"
        ));
    }
}
