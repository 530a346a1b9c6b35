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

mod check;
mod condition;
mod evaluation;
mod library;
mod program;
mod rule;
mod tree;
mod values;

pub(crate) use check::check_rules;
pub(crate) use condition::evaluate_condition;
pub(crate) use evaluation::{Limits, blocking_error, validate_rules};
pub(crate) use tree::CompiledRules;
