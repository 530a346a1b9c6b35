//! Server-side `meta.k8s.io/v1` `Table` rendering for `kubectl get`, modelled on the
//! apiextensions-apiserver CRD table convertor: printer columns, a Kubernetes-style JSONPath
//! subset and `duration.HumanDuration`.

mod build;
mod json_path;
#[cfg(test)]
mod tests;

pub(crate) use build::build_table;
pub(crate) use json_path::json_path;
