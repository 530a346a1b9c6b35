//! CEL validation rules (`x-kubernetes-validations`) of CRD schemas, as the apiserver has them
//! since 1.25 (GA in 1.29): compiled and checked when a CRD is written, evaluated on every
//! write of a custom resource, with `self` bound to the value at the rule's node and `oldSelf`
//! to its old value on updates.
//!
//! The interpreter is cel-rust (`cel`), with the strings extension and part of Kubernetes'
//! libraries (see [`library`]); what cel-go's type checker does is approximated by a check of
//! field names and result types (see [`program`]).
//!
//! # Cost
//!
//! The apiserver estimates each rule's worst-case cost from the schema's maxItems, maxLength
//! and maxProperties when the CRD is written, and meters every evaluation in cost units
//! (`PerCallLimit` = 1,000,000 per expression, `RuntimeCELCostBudget` = 10,000,000 per
//! object). Here there is no static estimate; each evaluation is metered instead, and its
//! unit is one node of the expression evaluated: every iteration of a comprehension (`all`,
//! `exists`, `map`, `filter`, `exists_one`) costs the size of its body. The same two limits
//! apply, with the apiserver's messages. Functions over a whole string or list (`matches`,
//! `contains`, `==` on lists) cost one unit whatever the size, which undercounts them; so
//! that such a rule cannot hold the server (it evaluates under the server's lock), an
//! object's rules also stop after two seconds of evaluation, as if over budget. Without the
//! static estimate, a CRD that the apiserver rejects as too expensive (`estimated rule cost
//! exceeds budget`) is accepted here, and its rules stop at run time instead.

mod evaluation;
mod library;
mod program;
mod rule;
mod values;

use serde_json::Value;

use super::keywords::{Additional, EMBEDDED, MAX_DEPTH, additional, is_true, items_schema, props};
use program::{CompileError, Expected, Program, compile};
use rule::RuleSpec;

pub(crate) use evaluation::{Limits, blocking_error, validate_rules};

/// The name of the extension holding the rules.
const VALIDATIONS: &str = "x-kubernetes-validations";

/// The compiled rules of one schema, in a tree that follows the schema's nodes that have
/// rules (or have descendants with rules).
#[derive(Debug, Default)]
pub(crate) struct CompiledRules {
    root: Node,
}

/// The compiled rules at one schema node, and the nodes below it with rules.
#[derive(Debug, Default)]
struct Node {
    /// The node's own rules, in order.
    rules: Vec<CompiledRule>,
    /// Properties with rules, in the schema's order.
    properties: Vec<(String, Node)>,
    /// The items' rules.
    items: Option<Box<Node>>,
    /// The map values' rules.
    additional: Option<Box<Node>>,
    /// Whether the node is a resource's root (self has apiVersion, kind and metadata).
    resource_root: bool,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.properties.is_empty()
            && self.items.is_none()
            && self.additional.is_none()
    }
}

/// One rule, compiled.
#[derive(Debug)]
struct CompiledRule {
    spec: RuleSpec,
    /// The program, or why it does not compile (`None` for an empty rule, which is skipped).
    program: Option<Result<Program, CompileError>>,
    /// The message expression's program, if it has one that compiles.
    message: Option<Program>,
}

impl CompiledRules {
    /// Compiles the rules of a version's `openAPIV3Schema`; `None` when it has none.
    pub(crate) fn compile(schema: &Value) -> Option<CompiledRules> {
        let root = compile_node(schema, true, 0);
        (!root.is_empty()).then_some(CompiledRules { root })
    }
}

fn compile_node(schema: &Value, resource_root: bool, depth: usize) -> Node {
    let mut node = Node {
        resource_root,
        ..Node::default()
    };
    if depth > MAX_DEPTH {
        return node;
    }
    for entry in rule_entries(schema) {
        let spec = RuleSpec::parse(entry);
        let program = (!spec.rule.trim().is_empty())
            .then(|| compile(&spec.rule, schema, resource_root, Expected::Bool));
        let message = (!spec.message_expression.trim().is_empty())
            .then(|| {
                compile(
                    &spec.message_expression,
                    schema,
                    resource_root,
                    Expected::String,
                )
            })
            .and_then(Result::ok);
        node.rules.push(CompiledRule {
            spec,
            program,
            message,
        });
    }
    if let Some(items) = items_schema(schema) {
        let child = compile_node(items, is_true(items, EMBEDDED), depth + 1);
        node.items = (!child.is_empty()).then(|| Box::new(child));
    }
    for (key, property) in props(schema).into_iter().flatten() {
        let child = compile_node(property, is_true(property, EMBEDDED), depth + 1);
        if !child.is_empty() {
            node.properties.push((key.clone(), child));
        }
    }
    if let Additional::Schema(values) = additional(schema) {
        let child = compile_node(values, is_true(values, EMBEDDED), depth + 1);
        node.additional = (!child.is_empty()).then(|| Box::new(child));
    }
    node
}

/// The entries of a node's `x-kubernetes-validations`.
fn rule_entries(schema: &Value) -> impl Iterator<Item = &Value> {
    schema
        .get(VALIDATIONS)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Checks the rules of a schema as the apiserver does when a CRD is written: the rules'
/// fields, then (where those are fine) that each rule and message expression compiles.
/// Problems read as [`super::check_structural`]'s do (`<path>: <detail>`), with `base` the
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
                crate::apiserver::semantics::go_format::go_value(entries)
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
                crate::apiserver::semantics::go_format::go_quote(&spec.rule)
            ));
        }
    } else if let Some(optional) = spec.optional_old_self {
        out.push(format!(
            "{path}.optionalOldSelf: Invalid value: {optional}: may not be set if oldSelf is not used in rule"
        ));
    }
}
