//! One CEL expression compiled for a schema node: parsed, checked against the schema (field
//! names, result type), and metered so that its evaluation stays within a cost bound.
//!
//! The check is a small part of cel-go's type checker: a field selected from an object whose
//! properties are declared must be one of them (`undefined field 'x'`), and a rule must not be
//! plainly of another type than bool (a message expression than string). Anything it cannot
//! tell is let through, to fail (if at all) when it runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue, SourceInfo};
use cel::common::types::CelInt;
use cel::objects::Value as Cel;
use cel::{Context, ExecutionError};
use serde_json::Value;

use super::super::keywords::{
    Additional, EMBEDDED, INT_OR_STRING, additional, is_true, items_schema, prop, props, type_str,
};
use super::library::environment;
use super::values::ROOT_METADATA_FIELDS;

/// The name of the variable bound to the value at the rule's node.
pub(super) const SELF: &str = "self";
/// The name of the variable bound to the old value, in transition rules.
pub(super) const OLD_SELF: &str = "oldSelf";
/// The function that charges a comprehension's iterations (a name CEL source cannot spell).
const COST: &str = "@kopf_cost";

/// What an expression must evaluate to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expected {
    /// A rule: a bool.
    Bool,
    /// A message expression: a string.
    String,
}

/// Why an expression did not compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CompileError {
    /// Parse or check errors, in cel-go's words (`ERROR: <input>:1:6: ...` with the line and a caret).
    Issues(String),
    /// The expression is of another type than the one expected.
    WrongType,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Issues(issues) => write!(f, "compilation failed: {issues}"),
            CompileError::WrongType => write!(f, "cel expression must evaluate to a bool"),
        }
    }
}

/// A compiled, metered expression.
#[derive(Debug)]
pub(super) struct Program {
    /// The expression, with its comprehensions' iterations charged to the meter.
    expression: IdedExpr,
    /// The cost of one evaluation apart from iterations: its number of nodes.
    nodes: u64,
    /// Whether it reads `oldSelf` (a transition rule).
    pub(super) uses_old_self: bool,
}

/// Compiles `source` for a node of `schema` (`resource_root` for the root of a resource).
pub(super) fn compile(
    source: &str,
    schema: &Value,
    resource_root: bool,
    expected: Expected,
) -> Result<Program, CompileError> {
    let env = environment();
    let parsed = env.compile(source).map_err(|errors| {
        let issues: Vec<String> = errors
            .errors
            .iter()
            .map(|e| {
                issue(
                    source,
                    e.pos.0.max(1) as usize,
                    e.pos.1.max(1) as usize - 1,
                    &e.msg,
                )
            })
            .collect();
        CompileError::Issues(issues.join("\n"))
    })?;
    let root = Ty::Node(schema, resource_root);
    let mut checker = Checker {
        scopes: vec![(SELF.to_string(), root), (OLD_SELF.to_string(), root)],
        problems: Vec::new(),
    };
    let ty = checker.check(parsed.expression());
    if !checker.problems.is_empty() {
        let info = parsed.source_info();
        let issues: Vec<String> = checker
            .problems
            .iter()
            .map(|(id, message)| {
                let (line, column) = position(info, source, *id);
                issue(source, line, column, message)
            })
            .collect();
        return Err(CompileError::Issues(issues.join("\n")));
    }
    let wanted = match expected {
        Expected::Bool => "bool",
        Expected::String => "string",
    };
    if ty.scalar().is_some_and(|t| t != wanted) {
        return Err(CompileError::WrongType);
    }
    let mut expression = parsed.expression().clone();
    let nodes = meter(&mut expression);
    Ok(Program {
        uses_old_self: mentions(parsed.expression(), OLD_SELF),
        expression,
        nodes,
    })
}

/// One issue as cel-go prints it: the place (column from 1), the line, and a caret under it.
fn issue(source: &str, line: usize, column: usize, message: &str) -> String {
    let text = source
        .lines()
        .nth(line.saturating_sub(1))
        .unwrap_or_default();
    format!(
        "ERROR: <input>:{line}:{}: {message}\n | {text}\n | {}^",
        column + 1,
        ".".repeat(column)
    )
}

/// The line (from 1) and column (from 0, in characters) where a node starts.
fn position(info: &SourceInfo, source: &str, id: u64) -> (usize, usize) {
    let start = info.offset_for(id).map_or(0, |(start, _)| start as usize);
    let mut line = 1;
    let mut column = 0;
    for (i, c) in source.chars().enumerate() {
        if i >= start {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// What the checker knows of an expression's value.
#[derive(Debug, Clone, Copy)]
enum Ty<'s> {
    /// A value of this schema node (a resource's root when the flag is set).
    Node(&'s Value, bool),
    /// `metadata` at a resource's root.
    Metadata,
    /// A value of a CEL type known by name (`bool`, `string`, `int`, ...).
    Scalar(&'static str),
    /// Anything.
    Unknown,
}

impl Ty<'_> {
    /// The CEL type name, when known.
    fn scalar(&self) -> Option<&'static str> {
        match self {
            Ty::Scalar(t) => Some(t),
            Ty::Node(s, _) if !is_true(s, INT_OR_STRING) => match type_str(s) {
                Some("string") => Some("string"),
                Some("integer") => Some("int"),
                Some("number") => Some("double"),
                Some("boolean") => Some("bool"),
                Some("array") => Some("list"),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Walks an expression with the schema types of its variables, collecting problems.
struct Checker<'s> {
    /// Variables in scope, innermost last.
    scopes: Vec<(String, Ty<'s>)>,
    /// Problems found, with the id of the node they are about.
    problems: Vec<(u64, String)>,
}

impl<'s> Checker<'s> {
    fn check(&mut self, e: &IdedExpr) -> Ty<'s> {
        match &e.expr {
            Expr::Literal(literal) => Ty::Scalar(match literal {
                LiteralValue::Boolean(_) => "bool",
                LiteralValue::Bytes(_) => "bytes",
                LiteralValue::Double(_) => "double",
                LiteralValue::Int(_) => "int",
                LiteralValue::Null => "null_type",
                LiteralValue::String(_) => "string",
                LiteralValue::UInt(_) => "uint",
            }),
            Expr::Ident(name) => self
                .scopes
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map_or(Ty::Unknown, |(_, t)| *t),
            Expr::Select(select) => {
                let operand = self.check(&select.operand);
                let field = self.field(operand, &select.field, e.id);
                if select.test {
                    Ty::Scalar("bool")
                } else {
                    field
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                for element in &list.elements {
                    self.check(element);
                }
                Ty::Scalar("list")
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        self.check(&m.key);
                        self.check(&m.value);
                    }
                }
                Ty::Scalar("map")
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let (first, second) = match range {
                    Ty::Node(s, _) if type_str(s) == Some("array") => (
                        Ty::Scalar("int"),
                        items_schema(s).map_or(Ty::Unknown, |i| Ty::Node(i, is_true(i, EMBEDDED))),
                    ),
                    Ty::Node(s, _) => (Ty::Scalar("string"), element_of_map(s)),
                    _ => (Ty::Unknown, Ty::Unknown),
                };
                // With one variable it is the element (a list's item, a map's key).
                let item = if c.iter_var2.is_some() {
                    first
                } else {
                    match range {
                        Ty::Node(s, _) if type_str(s) == Some("array") => second,
                        Ty::Node(..) => Ty::Scalar("string"),
                        _ => Ty::Unknown,
                    }
                };
                let accu = self.check(&c.accu_init);
                let depth = self.scopes.len();
                self.scopes.push((c.iter_var.clone(), item));
                if let Some(var2) = &c.iter_var2 {
                    self.scopes.push((var2.clone(), second));
                }
                self.scopes.push((c.accu_var.clone(), accu));
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                let result = self.check(&c.result);
                self.scopes.truncate(depth);
                result
            }
            Expr::Struct(_) | Expr::Unspecified => Ty::Unknown,
        }
    }

    /// The type of `operand.field`; an undeclared field of an object is a problem.
    fn field(&mut self, operand: Ty<'s>, field: &str, id: u64) -> Ty<'s> {
        match operand {
            Ty::Node(s, root) => {
                if root && matches!(field, "apiVersion" | "kind") {
                    return Ty::Scalar("string");
                }
                if root && field == "metadata" {
                    return Ty::Metadata;
                }
                if let Some(p) = prop(s, field) {
                    return Ty::Node(p, is_true(p, EMBEDDED));
                }
                if let Additional::Schema(a) = additional(s) {
                    return Ty::Node(a, is_true(a, EMBEDDED));
                }
                if props(s).is_some_and(|p| !p.is_empty()) {
                    self.problems
                        .push((id, format!("undefined field '{field}'")));
                }
                Ty::Unknown
            }
            Ty::Metadata => {
                if !ROOT_METADATA_FIELDS.contains(&field) {
                    self.problems
                        .push((id, format!("undefined field '{field}'")));
                }
                Ty::Scalar("string")
            }
            Ty::Scalar(_) | Ty::Unknown => Ty::Unknown,
        }
    }

    fn call(&mut self, call: &CallExpr) -> Ty<'s> {
        let target = call.target.as_ref().map(|t| self.check(t));
        let args: Vec<Ty<'s>> = call.args.iter().map(|a| self.check(a)).collect();
        match call.func_name.as_str() {
            "_==_"
            | "_!=_"
            | "_<_"
            | "_<=_"
            | "_>_"
            | "_>=_"
            | "_&&_"
            | "_||_"
            | "!_"
            | "@in"
            | "@not_strictly_false"
            | "matches"
            | "startsWith"
            | "endsWith"
            | "contains"
            | "isSorted"
            | "sets.contains"
            | "sets.intersects"
            | "sets.equivalent"
            | "hasValue" => Ty::Scalar("bool"),
            "size" | "int" | "indexOf" | "lastIndexOf" => Ty::Scalar("int"),
            "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring"
            | "charAt" | "join" | "format" | "find" | "strings.quote" => Ty::Scalar("string"),
            "double" => Ty::Scalar("double"),
            "_[_]" => match (args.first(), target) {
                (Some(Ty::Node(s, _)), None) if type_str(s) == Some("array") => {
                    items_schema(s).map_or(Ty::Unknown, |i| Ty::Node(i, is_true(i, EMBEDDED)))
                }
                (Some(Ty::Node(s, _)), None) => element_of_map(s),
                _ => Ty::Unknown,
            },
            "_?_:_" => match (
                args.get(1).and_then(Ty::scalar),
                args.get(2).and_then(Ty::scalar),
            ) {
                (Some(a), Some(b)) if a == b => Ty::Scalar(a),
                _ => Ty::Unknown,
            },
            "_+_" | "_-_" | "_*_" | "_/_" | "_%_" => {
                match (
                    args.first().and_then(Ty::scalar),
                    args.get(1).and_then(Ty::scalar),
                ) {
                    (Some(a), Some(b)) if a == b && a != "list" => Ty::Scalar(a),
                    _ => Ty::Unknown,
                }
            }
            _ => Ty::Unknown,
        }
    }
}

/// The type of a map's values (additionalProperties).
fn element_of_map(s: &Value) -> Ty<'_> {
    match additional(s) {
        Additional::Schema(a) => Ty::Node(a, is_true(a, EMBEDDED)),
        _ => Ty::Unknown,
    }
}

/// Whether an expression reads the variable `name`.
fn mentions(e: &IdedExpr, name: &str) -> bool {
    let mut found = false;
    visit(e, &mut |e| {
        if matches!(&e.expr, Expr::Ident(n) if n == name) {
            found = true;
        }
    });
    found
}

/// Calls `f` on every node of an expression.
fn visit(e: &IdedExpr, f: &mut impl FnMut(&IdedExpr)) {
    f(e);
    match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                visit(t, f);
            }
            for a in &call.args {
                visit(a, f);
            }
        }
        Expr::Select(s) => visit(&s.operand, f),
        Expr::List(l) => l.elements.iter().for_each(|x| visit(x, f)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                    visit(&m.key, f);
                    visit(&m.value, f);
                }
            }
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                visit(x, f);
            }
        }
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The number of nodes of an expression.
fn size(e: &IdedExpr) -> u64 {
    let mut n = 0;
    visit(e, &mut |_| n += 1);
    n
}

/// Rewrites every comprehension so that each iteration first charges the meter with the size
/// of what the iteration evaluates (`@kopf_cost(n) ? <step> : null`), keeping the shapes of
/// the macros' steps that the interpreter optimises. Returns the expression's size.
fn meter(e: &mut IdedExpr) -> u64 {
    let total = size(e);
    meter_nodes(e);
    total
}

fn meter_nodes(e: &mut IdedExpr) {
    match &mut e.expr {
        Expr::Call(call) => {
            if let Some(t) = &mut call.target {
                meter_nodes(t);
            }
            call.args.iter_mut().for_each(meter_nodes);
        }
        Expr::Select(s) => meter_nodes(&mut s.operand),
        Expr::List(l) => l.elements.iter_mut().for_each(meter_nodes),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(m) = &mut entry.expr {
                    meter_nodes(&mut m.key);
                    meter_nodes(&mut m.value);
                }
            }
        }
        Expr::Comprehension(c) => {
            let weight = size(&c.loop_step) + size(&c.loop_cond);
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_step,
                &mut c.result,
            ] {
                meter_nodes(x);
            }
            let accu = c.accu_var.clone();
            let is_accu = |x: &IdedExpr| matches!(&x.expr, Expr::Ident(n) if *n == accu);
            let step = &mut c.loop_step;
            let part: &mut IdedExpr = match &mut step.expr {
                Expr::Call(call)
                    if matches!(call.func_name.as_str(), "_&&_" | "_||_")
                        && call.args.len() == 2
                        && is_accu(&call.args[0]) =>
                {
                    &mut call.args[1]
                }
                Expr::Call(call) if call.func_name == "_?_:_" && call.args.len() == 3 => {
                    &mut call.args[0]
                }
                Expr::Call(call)
                    if call.func_name == "_+_"
                        && call.args.len() == 2
                        && is_accu(&call.args[0])
                        && matches!(&call.args[1].expr, Expr::List(l) if !l.elements.is_empty()) =>
                {
                    match &mut call.args[1].expr {
                        Expr::List(l) => &mut l.elements[0],
                        _ => unreachable!("matched as a list just above"),
                    }
                }
                _ => step,
            };
            charge_before(part, weight.max(1));
        }
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Replaces `e` with `@kopf_cost(weight) ? e : null`.
fn charge_before(e: &mut IdedExpr, weight: u64) {
    let inner = std::mem::take(e);
    let id = inner.id;
    let node = |expr| IdedExpr { id, expr };
    let cost = node(Expr::Call(CallExpr {
        func_name: COST.to_string(),
        target: None,
        args: vec![node(Expr::Literal(LiteralValue::Int(CelInt::from(
            i64::try_from(weight).unwrap_or(i64::MAX),
        ))))],
    }));
    *e = node(Expr::Call(CallExpr {
        func_name: "_?_:_".to_string(),
        target: None,
        args: vec![cost, inner, node(Expr::Literal(LiteralValue::Null))],
    }));
}

/// A CEL optional: `optional.of(value)`, or `optional.none()` (made by CEL itself, as the
/// interpreter does not expose its optional type).
pub(super) fn optional(
    value: Option<Box<dyn cel::common::value::Val>>,
) -> Box<dyn cel::common::value::Val> {
    const HIDDEN: &str = "__kopf_optional_value__";
    static OF: LazyLock<Option<cel::Program>> = LazyLock::new(|| {
        environment()
            .compile(&format!("optional.of({HIDDEN})"))
            .ok()
    });
    static NONE: LazyLock<Option<cel::Program>> =
        LazyLock::new(|| environment().compile("optional.none()").ok());
    let mut context = Context::with_env(environment());
    let program = match value {
        Some(value) => {
            context.add_variable_as_val(HIDDEN, value);
            &*OF
        }
        None => &*NONE,
    };
    program
        .as_ref()
        .and_then(|p| {
            Cel::resolve_val(p.expression(), &context)
                .ok()
                .map(|v| v.into_owned())
        })
        .unwrap_or_else(|| Box::new(cel::common::types::CelNull))
}

/// How much evaluation the rules of one object may still do, in CEL cost units (about one
/// per node evaluated), and until when.
#[derive(Debug)]
pub(super) struct Meter {
    /// Units charged to the expression being evaluated.
    spent: AtomicU64,
    /// What the expression being evaluated may spend.
    limit: AtomicU64,
    /// Set once the limit or the deadline is passed; every later charge fails.
    tripped: AtomicBool,
    /// When the whole object's evaluation must stop, whatever the units say.
    deadline: Instant,
}

impl Meter {
    /// A meter that stops evaluation at `deadline`.
    pub(super) fn new(deadline: Instant) -> Arc<Meter> {
        Arc::new(Meter {
            spent: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            tripped: AtomicBool::new(false),
            deadline,
        })
    }

    /// Whether the deadline has passed.
    pub(super) fn past_deadline(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Charges `units`; false (and tripped) when over the limit or past the deadline.
    fn charge(&self, units: u64) -> bool {
        let spent = self.spent.fetch_add(units, Ordering::Relaxed) + units;
        if spent > self.limit.load(Ordering::Relaxed) || self.past_deadline() {
            self.tripped.store(true, Ordering::Relaxed);
        }
        !self.tripped.load(Ordering::Relaxed)
    }
}

/// How an evaluation ended, when not with a value.
#[derive(Debug)]
pub(super) enum Failure {
    /// The expression failed (no such key, division by zero, ...).
    Error(ExecutionError),
    /// The expression went over its limit or the deadline.
    OverLimit,
}

/// The result of one evaluation, and the units it spent.
pub(super) struct Evaluation {
    pub(super) result: Result<Cel, Failure>,
    pub(super) spent: u64,
}

impl Program {
    /// Evaluates with `self` (and, for transition rules, `oldSelf`) bound, spending at most
    /// `limit` units of `meter`.
    pub(super) fn evaluate(
        &self,
        variables: &[(&str, Box<dyn cel::common::value::Val>)],
        meter: &Arc<Meter>,
        limit: u64,
    ) -> Evaluation {
        meter.spent.store(0, Ordering::Relaxed);
        meter.limit.store(limit, Ordering::Relaxed);
        meter.tripped.store(false, Ordering::Relaxed);
        let mut context = Context::with_env(environment());
        let charged = meter.clone();
        let added = context.add_function(COST, move |units: i64| -> Result<bool, ExecutionError> {
            if charged.charge(u64::try_from(units).unwrap_or(0)) {
                Ok(true)
            } else {
                Err(ExecutionError::function_error(
                    "cost",
                    "operation cancelled: actual cost limit exceeded",
                ))
            }
        });
        let result = if added.is_err() {
            Err(Failure::Error(ExecutionError::InternalError(
                "the cost meter could not be set up".into(),
            )))
        } else if !meter.charge(self.nodes) {
            Err(Failure::OverLimit)
        } else {
            for (name, value) in variables {
                context.add_variable_as_val(*name, value.clone());
            }
            let result = Cel::resolve(&self.expression, &context);
            if meter.tripped.load(Ordering::Relaxed) {
                Err(Failure::OverLimit)
            } else {
                result.map_err(Failure::Error)
            }
        };
        Evaluation {
            result,
            spent: meter.spent.load(Ordering::Relaxed),
        }
    }
}
