//! Kubernetes label and field selectors, parsed and matched the way k8s.io/apimachinery does.

mod error;
mod fields;
mod labels;
#[cfg(test)]
mod tests;
mod validation;

pub(crate) use error::SelectorError;
pub(crate) use fields::FieldSelector;
pub(crate) use labels::LabelSelector;
