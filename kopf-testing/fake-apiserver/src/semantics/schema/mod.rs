//! Structural schemas of custom resources (a CRD version's `schema.openAPIV3Schema`): pruning, defaulting, validation and CRD schema checks, worded as the Kubernetes apiserver words them.
//!
//! The behaviour follows k8s.io/apiextensions-apiserver (pruning, defaulting, structural
//! checks, embedded resources, list types) and kube-openapi's `validate` package (value
//! validation), with their messages as apimachinery's `field.Error` renders them.
//! Schemas come from users and may be malformed: unknown or ill-typed parts are ignored
//! (or reported by [`check_structural`]), and nothing here panics.

mod cel;
mod defaults;
mod errors;
mod keywords;
mod lists;
mod prune;
mod structural;
#[cfg(test)]
mod tests;
mod validation;
mod values;

pub(crate) use cel::{
    CompiledRules, Limits, blocking_error, check_rules, evaluate_condition, validate_rules,
};
pub(crate) use defaults::apply_defaults;
pub(crate) use errors::invalid_message;
pub(crate) use prune::prune;
pub(crate) use structural::check_structural;
pub(crate) use validation::validate;
