//! Evaluating a custom resource's rules on a write, node by node as the apiserver does, with
//! its messages, cost limits and ratcheting (on updates, a rule's failure on a value that did
//! not change is a warning, unless the rule reads `oldSelf`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cel::ExecutionError;
use cel::common::value::Val;
use cel::objects::Value as Cel;
use serde_json::Value;

use super::super::errors::{
    DUPLICATE, FORBIDDEN, FieldError, INVALID, NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY,
    TYPE_INVALID,
};
use super::super::keywords::{
    Additional, LIST_MAP_KEYS, LIST_TYPE, additional, items_schema, kw, prop, type_str,
};
use super::program::{Evaluation, Failure, Meter, OLD_SELF, Program, SELF, optional};
use super::rule::{RuleSpec, field_path, has_newlines};
use super::tree::{CompiledRule, CompiledRules, Node};
use super::values::to_cel;
use crate::semantics::go_format::go_quote;
use crate::semantics::go_format::go_value;

/// How much evaluation the rules of one object may do.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The most cost units one expression may spend (`PerCallLimit`).
    pub(crate) per_call: u64,
    /// The most cost units the rules of one object may spend (`RuntimeCELCostBudget`).
    pub(crate) per_object: u64,
    /// How long the rules of one object may run, whatever they spend.
    pub(crate) time: Duration,
}

impl Limits {
    /// The apiserver's limits, and two seconds (the budget buys about one in the apiserver;
    /// an unoptimised build of this crate needs more for the same units).
    pub(crate) const APISERVER: Limits = Limits {
        per_call: 1_000_000,
        per_object: 10_000_000,
        time: Duration::from_secs(2),
    };
}
/// The longest message a message expression may make.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// What a custom resource's rules found.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// The failures, in the order the apiserver finds them.
    pub(crate) errors: Vec<FieldError>,
    /// The failures ratcheted into warnings (on values that did not change).
    pub(crate) warnings: Vec<String>,
}

/// The error that stands for the rules when the schema's checks found errors that keep the
/// apiserver from running them (required, unsupported, too long, too many, wrong type).
pub(crate) fn blocking_error(errors: &[FieldError]) -> Option<FieldError> {
    let blocking = [REQUIRED, NOT_SUPPORTED, TOO_LONG, TOO_MANY, TYPE_INVALID];
    errors.iter().any(|e| blocking.contains(&e.reason)).then(|| FieldError {
        field: "<nil>".to_string(),
        reason: INVALID,
        // `field.Invalid(nil, nil, ...)`: a nil value, which Go writes `null`.
        message: "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string(),
    })
}

/// Evaluates the rules on a written object (`old` for updates) whose version's schema is
/// `schema`.
pub(crate) fn validate_rules(
    rules: &CompiledRules,
    schema: &Value,
    object: &Value,
    old: Option<&Value>,
    limits: Limits,
) -> Outcome {
    let mut walk = Walk {
        meter: Meter::new(Instant::now() + limits.time),
        per_call: limits.per_call,
        budget: limits.per_object,
        stopped: false,
        outcome: Outcome::default(),
    };
    walk.node(&rules.root, schema, "", object, old, false);
    walk.outcome
}

/// One object's evaluation.
struct Walk {
    meter: Arc<Meter>,
    /// The most cost units one expression may spend.
    per_call: u64,
    /// Cost units left for the object.
    budget: u64,
    /// Set when the budget ran out or an expression went over its limit: no more rules run.
    stopped: bool,
    outcome: Outcome,
}

/// The path of a named child, as field.Path prints it.
fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Walk {
    /// Evaluates a node's rules, then its children's. `unchanged` says whether the nearest
    /// value that can be matched with its old one is equal to it.
    fn node(
        &mut self,
        node: &Node,
        schema: &Value,
        path: &str,
        value: &Value,
        old: Option<&Value>,
        parent_unchanged: bool,
    ) {
        if self.stopped || value.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        let unchanged = old.map_or(parent_unchanged, |o| o == value);
        if !node.rules.is_empty() {
            self.rules(node, schema, path, value, old, unchanged);
        }
        match value {
            Value::Array(items) => {
                let (Some(items_node), Some(item_schema)) = (&node.items, items_schema(schema))
                else {
                    return;
                };
                for (i, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|o| correlated_item(schema, item, o));
                    self.node(
                        items_node,
                        item_schema,
                        &format!("{path}[{i}]"),
                        item,
                        old_item,
                        unchanged,
                    );
                }
            }
            Value::Object(map) => {
                if let (Some(values_node), Additional::Schema(values_schema)) =
                    (&node.additional, additional(schema))
                {
                    for (key, field) in map {
                        let old_field = old.and_then(|o| o.get(key));
                        self.node(
                            values_node,
                            values_schema,
                            &format!("{path}[{key}]"),
                            field,
                            old_field,
                            unchanged,
                        );
                    }
                }
                for (key, property_node) in &node.properties {
                    if let (Some(field), Some(property)) = (map.get(key), prop(schema, key)) {
                        let old_field = old.and_then(|o| o.get(key));
                        self.node(
                            property_node,
                            property,
                            &child(path, key),
                            field,
                            old_field,
                            unchanged,
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// Evaluates the rules of one node.
    fn rules(
        &mut self,
        node: &Node,
        schema: &Value,
        path: &str,
        value: &Value,
        old: Option<&Value>,
        unchanged: bool,
    ) {
        let shown_type = go_quote(type_str(schema).unwrap_or_default());
        let field = if path.is_empty() {
            "<nil>".to_string()
        } else {
            path.to_string()
        };
        let invalid = |detail: String| FieldError {
            field: field.clone(),
            reason: INVALID,
            message: format!("Invalid value: {shown_type}: {detail}"),
        };
        if self.budget == 0 {
            self.outcome.errors.push(invalid("validation failed due to running out of cost budget, no further validation rules will be run".into()));
            self.stopped = true;
            return;
        }
        let self_value = as_val(to_cel(value, schema, node.resource_root));
        let old_value = old.map(|o| as_val(to_cel(o, schema, node.resource_root)));
        for compiled in &node.rules {
            let CompiledRule {
                spec,
                program,
                message,
            } = compiled;
            let program = match program {
                None => continue,
                Some(Err(error)) => {
                    self.outcome
                        .errors
                        .push(invalid(format!("rule compile error: {error}")));
                    continue;
                }
                Some(Ok(program)) => program,
            };
            let optional_old_self = spec.optional_old_self == Some(true);
            if program.uses_old_self && old_value.is_none() && !optional_old_self {
                continue;
            }
            let mut variables: Vec<(&str, Box<dyn Val>)> = vec![(SELF, self_value.clone())];
            if program.uses_old_self {
                let old_self: Box<dyn Val> = match (&old_value, optional_old_self) {
                    (Some(o), false) => o.clone(),
                    (o, _) => optional(o.clone()),
                };
                variables.push((OLD_SELF, old_self));
            }
            let shown_rule = rule_error_string(spec);
            let result = match self.run(program, &variables) {
                Ok(result) => result,
                Err(Failure::OverLimit) => {
                    let detail = if self.budget == 0 {
                        "validation failed due to running out of cost budget, no further validation rules will be run".to_string()
                    } else {
                        format!(
                            "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {shown_rule}"
                        )
                    };
                    self.outcome.errors.push(invalid(detail));
                    self.stopped = true;
                    return;
                }
                Err(Failure::Error(error)) => {
                    self.outcome
                        .errors
                        .push(invalid(runtime_error(&error, &shown_rule)));
                    continue;
                }
            };
            if result == Cel::Bool(true) {
                continue;
            }
            let at = match field_path(&spec.field_path, schema) {
                Ok(relative) if !spec.field_path.is_empty() => child(path, &relative),
                _ => path.to_string(),
            };
            let at = if at.is_empty() {
                "<nil>".to_string()
            } else {
                at
            };
            let detail = match message {
                Some(m) => match self.message(m, &variables, &spec.message_expression) {
                    Ok(detail) => detail,
                    Err(stop) => {
                        self.outcome.errors.push(FieldError {
                            field: at,
                            reason: INVALID,
                            message: format!("Invalid value: {shown_type}: {stop}"),
                        });
                        return;
                    }
                },
                None => None,
            };
            let detail = detail.unwrap_or_else(|| default_message(spec));
            // A failed rule shows the value of a scalar, and no value for an object or list.
            let shown_value = match value {
                Value::Object(_) | Value::Array(_) => None,
                scalar => Some(go_value(scalar)),
            };
            let error = reason_error(spec.reason.as_deref(), &at, shown_value.as_deref(), detail);
            if unchanged && !program.uses_old_self {
                self.outcome.warnings.push(error.to_string());
            } else {
                self.outcome.errors.push(error);
            }
        }
    }

    /// Evaluates a program within the per-call limit and what is left of the budget; going
    /// over the budget (or the time limit) leaves no budget.
    fn run(
        &mut self,
        program: &Program,
        variables: &[(&str, Box<dyn Val>)],
    ) -> Result<Cel, Failure> {
        let bound_by_budget = self.budget <= self.per_call;
        let limit = self.per_call.min(self.budget);
        let Evaluation { result, spent } = program.evaluate(variables, &self.meter, limit);
        self.budget = self.budget.saturating_sub(spent);
        if matches!(result, Err(Failure::OverLimit))
            && (bound_by_budget || self.meter.past_deadline())
        {
            self.budget = 0;
        }
        result
    }

    /// The message a message expression makes, when it makes a usable one; an error's detail
    /// when it went over a cost limit (no more rules run then).
    fn message(
        &mut self,
        program: &Program,
        variables: &[(&str, Box<dyn Val>)],
        expression: &str,
    ) -> Result<Option<String>, String> {
        match self.run(program, variables) {
            Ok(Cel::String(text)) => {
                let text = text.trim();
                Ok(
                    (!text.is_empty() && text.len() <= MAX_MESSAGE_BYTES && !has_newlines(text))
                        .then(|| text.to_string()),
                )
            }
            Err(Failure::OverLimit) => {
                self.stopped = true;
                Err(if self.budget == 0 {
                    "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string()
                } else {
                    format!(
                        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                        go_quote(expression)
                    )
                })
            }
            _ => Ok(None),
        }
    }
}

/// A CEL value as a variable's value.
fn as_val(value: Cel) -> Box<dyn Val> {
    Box::<dyn Val>::try_from(value).unwrap_or_else(|_| Box::new(cel::common::types::CelNull))
}

/// The old item that a new item of a list of type map stands for (same keys); none for
/// other lists, whose items cannot be matched.
fn correlated_item<'a>(schema: &Value, item: &Value, old: &'a Value) -> Option<&'a Value> {
    if kw(schema, LIST_TYPE).and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = kw(schema, LIST_MAP_KEYS)?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old.as_array()?
        .iter()
        .find(|candidate| keys.iter().all(|k| candidate.get(k) == item.get(k)))
}

/// The rule as errors name it: its message, else its expression.
fn rule_error_string(spec: &RuleSpec) -> String {
    if spec.message.is_empty() {
        spec.rule.trim().to_string()
    } else {
        spec.message.trim().to_string()
    }
}

/// The message of a failed rule without a usable message expression.
fn default_message(spec: &RuleSpec) -> String {
    if spec.message.is_empty() {
        format!("failed rule: {}", rule_error_string(spec))
    } else {
        spec.message.trim().to_string()
    }
}

/// A failed rule's error, of the type its `reason` says, with the value shown (Go's
/// `field.OmitValueType` when none is).
fn reason_error(
    reason: Option<&str>,
    field: &str,
    shown: Option<&str>,
    detail: String,
) -> FieldError {
    let (reason, message) = match (reason, shown) {
        (Some("FieldValueForbidden"), _) => (FORBIDDEN, format!("Forbidden: {detail}")),
        (Some("FieldValueRequired"), _) => (REQUIRED, format!("Required value: {detail}")),
        (Some("FieldValueDuplicate"), Some(value)) => {
            (DUPLICATE, format!("Duplicate value: {value}"))
        }
        (Some("FieldValueDuplicate"), None) => (DUPLICATE, "Duplicate value".to_string()),
        (_, Some(value)) => (INVALID, format!("Invalid value: {value}: {detail}")),
        (_, None) => (INVALID, format!("Invalid value: {detail}")),
    };
    FieldError {
        field: field.to_string(),
        reason,
        message,
    }
}

/// An evaluation error, as the apiserver words it (with cel-go's words for the error).
fn runtime_error(error: &ExecutionError, rule: &str) -> String {
    let text = match error {
        ExecutionError::NoSuchOverload(_) => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule}"
            );
        }
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::IndexOutOfBounds(index) => format!("index out of bounds: {}", show(index)),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::UndeclaredReference(name) => format!("no such attribute(s): {name}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    format!("{text} evaluating rule: {rule}")
}

/// A value as cel-go prints it in errors.
fn show(value: &Cel) -> String {
    match value {
        Cel::Int(i) => i.to_string(),
        Cel::UInt(u) => u.to_string(),
        Cel::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}
