//! The compiled rules of a schema, in a tree that follows the schema's nodes with rules.

use serde_json::Value;

use super::super::keywords::{
    Additional, EMBEDDED, MAX_DEPTH, additional, is_true, items_schema, props,
};
use super::program::{CompileError, Expected, Program, compile};
use super::rule::RuleSpec;

/// The name of the extension holding the rules.
pub(super) const VALIDATIONS: &str = "x-kubernetes-validations";

/// The compiled rules of one schema, in a tree that follows the schema's nodes that have
/// rules (or have descendants with rules).
#[derive(Debug, Default)]
pub(crate) struct CompiledRules {
    pub(super) root: Node,
}

/// The compiled rules at one schema node, and the nodes below it with rules.
#[derive(Debug, Default)]
pub(super) struct Node {
    /// The node's own rules, in order.
    pub(super) rules: Vec<CompiledRule>,
    /// Properties with rules, in the schema's order.
    pub(super) properties: Vec<(String, Node)>,
    /// The items' rules.
    pub(super) items: Option<Box<Node>>,
    /// The map values' rules.
    pub(super) additional: Option<Box<Node>>,
    /// Whether the node is a resource's root (self has apiVersion, kind and metadata).
    pub(super) resource_root: bool,
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
pub(super) struct CompiledRule {
    pub(super) spec: RuleSpec,
    /// The program, or why it does not compile (`None` for an empty rule, which is skipped).
    pub(super) program: Option<Result<Program, CompileError>>,
    /// The message expression's program, if it has one that compiles.
    pub(super) message: Option<Program>,
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
pub(super) fn rule_entries(schema: &Value) -> impl Iterator<Item = &Value> {
    schema
        .get(VALIDATIONS)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}
