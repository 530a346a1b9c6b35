//! The CEL environment that rules are compiled and run in: CEL's standard library, cel-go's
//! strings and lists extensions, and the parts of Kubernetes' own libraries (lists, regex,
//! sets) that are cheap to have. Missing: `quantity()`, `url()`, `ip()`, `cidr()`,
//! `semver()`, the authorizer, and timestamps and durations made from `date-time` and
//! `duration` strings (those are plain strings here).

use std::sync::{Arc, LazyLock};

use cel::Env;
use cel::ExecutionError;
use cel::common::types::{LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::Value;

/// The environment shared by every rule of every CRD (it holds no per-rule state).
pub(super) fn environment() -> Arc<Env> {
    static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));
    ENV.clone()
}

fn build() -> Env {
    let mut env = Env::stdlib();
    // Registration fails only for a name declared twice, which would be a bug here.
    let registered = cel::extensions::strings(&mut env)
        .and_then(|()| cel::extensions::lists(&mut env))
        .and_then(|()| register(&mut env));
    if let Err(error) = registered {
        tracing::error!(%error, "the CEL environment lacks Kubernetes' library functions");
    }
    env
}

fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    let list = || LIST_TYPE;
    env.add_member_overload("isSorted", "list.isSorted()", list(), vec![], is_sorted)?;
    env.add_member_overload("sum", "list.sum()", list(), vec![], sum)?;
    env.add_member_overload("min", "list.min()", list(), vec![], min)?;
    env.add_member_overload("max", "list.max()", list(), vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list.indexOf(dyn)",
        list(),
        vec![cel::common::types::DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        list(),
        vec![cel::common::types::DYN_TYPE],
        last_index_of,
    )?;
    env.add_member_overload(
        "find",
        "string.find(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string)",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string.findAll(string,int)",
        STRING_TYPE,
        vec![STRING_TYPE, cel::common::types::INT_TYPE],
        find_all_n,
    )?;
    let two = || vec![list(), list()];
    env.add_overload(
        "sets.contains",
        "sets.contains(list,list)",
        two(),
        sets_contains,
    )?;
    env.add_overload(
        "sets.intersects",
        "sets.intersects(list,list)",
        two(),
        sets_intersects,
    )?;
    env.add_overload(
        "sets.equivalent",
        "sets.equivalent(list,list)",
        two(),
        sets_equivalent,
    )?;
    Ok(())
}

/// The arguments of an overload as plain values (the receiver first).
fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

/// A result value for the interpreter.
fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    Ok(CowVal::Owned(Box::<dyn Val>::try_from(value)?))
}

/// The elements of a list receiver.
fn elements(value: &Value) -> Result<&[Value], ExecutionError> {
    match value {
        Value::List(items) => Ok(items),
        other => Err(ExecutionError::unsupported_target_type(other.clone())),
    }
}

/// The ordering of two list elements; elements of different kinds cannot be compared.
fn compare(a: &Value, b: &Value, function: &str) -> Result<std::cmp::Ordering, ExecutionError> {
    a.partial_cmp(b)
        .filter(|_| std::mem::discriminant(a) == std::mem::discriminant(b))
        .ok_or_else(|| ExecutionError::function_error(function, "elements are not comparable"))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = elements(&args[0])?;
    for pair in items.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == std::cmp::Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let items = elements(&args[0])?;
    let mut total = match items.first() {
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(Value::UInt(_)) => Value::UInt(0),
        _ => Value::Int(0),
    };
    for item in items {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => a
                .checked_add(*b)
                .map(Value::Int)
                .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            (Value::UInt(a), Value::UInt(b)) => {
                a.checked_add(*b).map(Value::UInt).ok_or_else(|| {
                    ExecutionError::function_error("sum", "unsigned integer overflow")
                })?
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => {
                return Err(ExecutionError::function_error(
                    "sum",
                    "elements are not numbers of one type",
                ));
            }
        };
    }
    owned(total)
}

/// The least (or greatest) element; an error for an empty list, as in Kubernetes.
fn extreme(
    args: &[CowVal<'_, '_>],
    function: &str,
    wanted: std::cmp::Ordering,
) -> Result<Value, ExecutionError> {
    let args = values(args)?;
    let items = elements(&args[0])?;
    let mut best = items
        .first()
        .ok_or_else(|| ExecutionError::function_error(function, "called on empty list"))?;
    for item in &items[1..] {
        if compare(item, best, function)? == wanted {
            best = item;
        }
    }
    Ok(best.clone())
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(extreme(&args, "min", std::cmp::Ordering::Less)?)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    owned(extreme(&args, "max", std::cmp::Ordering::Greater)?)
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let position = elements(&args[0])?.iter().position(|v| *v == args[1]);
    owned(Value::Int(position.map_or(-1, |i| i as i64)))
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let position = elements(&args[0])?.iter().rposition(|v| *v == args[1]);
    owned(Value::Int(position.map_or(-1, |i| i as i64)))
}

/// The receiver string and a compiled pattern.
fn text_and_pattern(
    args: &[Value],
    function: &str,
) -> Result<(Arc<String>, regex::Regex), ExecutionError> {
    match (&args[0], &args[1]) {
        (Value::String(text), Value::String(pattern)) => {
            let regex = regex::Regex::new(pattern)
                .map_err(|e| ExecutionError::function_error(function, e))?;
            Ok((text.clone(), regex))
        }
        _ => Err(ExecutionError::function_error(
            function,
            "expects a string and a pattern",
        )),
    }
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, regex) = text_and_pattern(&values(&args)?, "find")?;
    let found = regex.find(&text).map_or("", |m| m.as_str());
    owned(Value::String(Arc::new(found.to_string())))
}

/// All the matches, at most `limit` of them when it is not negative.
fn matches_of(text: &str, regex: &regex::Regex, limit: i64) -> Value {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Value> = regex
        .find_iter(text)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    Value::List(Arc::new(found))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (text, regex) = text_and_pattern(&values(&args)?, "findAll")?;
    owned(matches_of(&text, &regex, -1))
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let args = values(&args)?;
    let (text, regex) = text_and_pattern(&args, "findAll")?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) => *n,
        _ => -1,
    };
    owned(matches_of(&text, &regex, limit))
}

/// Most element comparisons one `sets.*` call may make (it compares every pair), so that a
/// call on two huge lists fails instead of holding the server.
const MAX_SET_COMPARISONS: usize = 10_000_000;

/// The two list arguments of a `sets.*` function.
fn two_lists(args: &[CowVal<'_, '_>]) -> Result<(Vec<Value>, Vec<Value>), ExecutionError> {
    let args = values(args)?;
    let (a, b) = (elements(&args[0])?, elements(&args[1])?);
    if a.len().saturating_mul(b.len()) > MAX_SET_COMPARISONS {
        return Err(ExecutionError::function_error(
            "sets",
            "operation cancelled: actual cost limit exceeded",
        ));
    }
    Ok((a.to_vec(), b.to_vec()))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args)?;
    owned(Value::Bool(b.iter().all(|x| a.contains(x))))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args)?;
    owned(Value::Bool(b.iter().any(|x| a.contains(x))))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (a, b) = two_lists(&args)?;
    owned(Value::Bool(
        b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x)),
    ))
}
