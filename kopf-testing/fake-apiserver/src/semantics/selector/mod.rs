//! Kubernetes label, field and shard selectors, parsed and matched the way k8s.io/apimachinery
//! and k8s.io/apiserver do.

mod error;
mod fields;
mod labels;
mod shard_expr;
#[cfg(test)]
mod shard_tests;
mod shards;
#[cfg(test)]
mod tests;
mod validation;

pub(crate) use error::SelectorError;
pub(crate) use fields::FieldSelector;
pub(crate) use labels::LabelSelector;
pub(crate) use shards::ShardSelector;
pub(crate) use validation::qualified_name_errors as label_key_errors;
