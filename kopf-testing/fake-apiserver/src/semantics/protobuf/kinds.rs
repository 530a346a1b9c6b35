//! The decodable kinds: the core kinds described by hand (Namespace, ConfigMap, Secret,
//! ServiceAccount, Service, Pod) and those generated from `k8s.io/api` (see [`super::generated`]).

use super::core::{CONFIG_MAP, NAMESPACE, SECRET, SERVICE, SERVICE_ACCOUNT};
use super::generated;
use super::pod::POD;
use super::schema::Schema;

/// The kinds described by hand: (apiVersion, kind, schema).
static HAND_WRITTEN: &[(&str, &str, &Schema)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
];

/// All decodable kinds: (apiVersion, kind, schema).
pub(crate) fn decodable()
-> impl Iterator<Item = &'static (&'static str, &'static str, &'static Schema)> {
    HAND_WRITTEN.iter().chain(generated::KINDS)
}

/// The schema of a kind's top-level message, if the kind is decodable.
pub(crate) fn schema_of(api_version: &str, kind: &str) -> Option<&'static Schema> {
    decodable()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|&(_, _, schema)| schema)
}
