//! One CEL expression over untyped JSON variables, as admission webhooks' `matchConditions`
//! are evaluated (`object`, `oldObject`, `request`), in the same environment as CRD rules.

use cel::Context;
use cel::common::value::Val;
use cel::objects::Value as Cel;
use serde_json::Value;

use super::library::environment;
use super::values::untyped_value;

/// Evaluates `expression` with `variables` bound; a result other than a bool is an error.
pub(crate) fn evaluate_condition(
    expression: &str,
    variables: &[(&str, &Value)],
) -> Result<bool, String> {
    let env = environment();
    let parsed = env.compile(expression).map_err(|errors| {
        errors
            .errors
            .iter()
            .map(|e| e.msg.clone())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let mut context = Context::with_env(env.clone());
    for (name, value) in variables {
        let value = Box::<dyn Val>::try_from(untyped_value(value))
            .unwrap_or_else(|_| Box::new(cel::common::types::CelNull));
        context.add_variable_as_val(*name, value);
    }
    match Cel::resolve(parsed.expression(), &context) {
        Ok(Cel::Bool(result)) => Ok(result),
        Ok(other) => Err(format!("the expression gave {other:?}, not a bool")),
        Err(error) => Err(error.to_string()),
    }
}
