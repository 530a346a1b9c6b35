//! The webhooks that Validating- and MutatingWebhookConfigurations register, read from the
//! stored configurations as kube-apiserver reads them: configurations in the order of their
//! names, entries in list order, with the API's defaults for what an entry leaves out.

use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::storage::object;
use crate::storage::state::State;

/// The API group of webhook configurations and admission policies.
pub(crate) const GROUP: &str = "admissionregistration.k8s.io";

/// The timeout of a webhook that names none (`timeoutSeconds`).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which admission phase a webhook belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `MutatingWebhookConfiguration`: called one by one, may patch the object.
    Mutating,
    /// `ValidatingWebhookConfiguration`: called all together, may only allow or deny.
    Validating,
}

impl Phase {
    fn plural(self) -> &'static str {
        match self {
            Phase::Mutating => "mutatingwebhookconfigurations",
            Phase::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// Where a webhook is called (`clientConfig`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `clientConfig.url`, as given.
    Url(String),
    /// `clientConfig.service`: a Service of the cluster.
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// What to do when calling the webhook fails (`failurePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    /// The request fails with `500 InternalError` (the default).
    Fail,
    /// The webhook is skipped.
    Ignore,
}

/// One rule of a webhook (`rules[]`): operations on resources it is called for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) operations: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) api_versions: Vec<String>,
    pub(crate) resources: Vec<String>,
    /// `*` (the default), `Namespaced` or `Cluster`.
    pub(crate) scope: String,
}

/// One CEL condition that must hold for the webhook to be called (`matchConditions[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MatchCondition {
    pub(crate) name: String,
    pub(crate) expression: String,
}

/// One webhook entry of a configuration.
#[derive(Debug, Clone)]
pub(crate) struct Webhook {
    pub(crate) name: String,
    pub(crate) phase: Phase,
    pub(crate) endpoint: Endpoint,
    /// The PEM certificates to trust (`caBundle`, decoded); none: the system's roots.
    pub(crate) ca_bundle: Option<Vec<u8>>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) failure_policy: FailurePolicy,
    /// `matchPolicy: Exact`; the default `Equivalent` matches other versions of a resource too.
    pub(crate) exact: bool,
    pub(crate) namespace_selector: Value,
    pub(crate) object_selector: Value,
    /// `sideEffects`: `None`, `NoneOnDryRun`, or (v1beta1 leftovers) `Some`, `Unknown`.
    pub(crate) side_effects: String,
    pub(crate) timeout: Duration,
    pub(crate) review_versions: Vec<String>,
    pub(crate) match_conditions: Vec<MatchCondition>,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub(crate) reinvoke: bool,
}

impl Webhook {
    /// Reads one entry of a configuration; `None` for one without a name.
    pub(super) fn parse(phase: Phase, entry: &Value) -> Option<Webhook> {
        let name = entry["name"]
            .as_str()
            .filter(|n| !n.is_empty())?
            .to_string();
        let client = &entry["clientConfig"];
        let endpoint = match client["url"].as_str() {
            Some(url) => Endpoint::Url(url.to_string()),
            None => Endpoint::Service {
                namespace: text(&client["service"]["namespace"]),
                name: text(&client["service"]["name"]),
                path: text(&client["service"]["path"]),
                port: client["service"]["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            },
        };
        let ca_bundle = client["caBundle"]
            .as_str()
            .filter(|b| !b.is_empty())
            .map(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .unwrap_or_default()
            });
        let rules = entry["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|rule| Rule {
                operations: texts(&rule["operations"]),
                api_groups: texts(&rule["apiGroups"]),
                api_versions: texts(&rule["apiVersions"]),
                resources: texts(&rule["resources"]),
                scope: rule["scope"].as_str().unwrap_or("*").to_string(),
            })
            .collect();
        let failure_policy = match entry["failurePolicy"].as_str() {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        };
        let match_conditions = entry["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|condition| MatchCondition {
                name: text(&condition["name"]),
                expression: text(&condition["expression"]),
            })
            .collect();
        Some(Webhook {
            name,
            phase,
            endpoint,
            ca_bundle,
            rules,
            failure_policy,
            exact: entry["matchPolicy"] == "Exact",
            namespace_selector: selector(&entry["namespaceSelector"]),
            object_selector: selector(&entry["objectSelector"]),
            side_effects: entry["sideEffects"]
                .as_str()
                .unwrap_or("Unknown")
                .to_string(),
            timeout: entry["timeoutSeconds"]
                .as_u64()
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_TIMEOUT),
            review_versions: texts(&entry["admissionReviewVersions"]),
            match_conditions,
            reinvoke: entry["reinvocationPolicy"] == "IfNeeded",
        })
    }

    /// Whether the webhook may be called for a dry run: it declares no side effects, or none
    /// on dry runs.
    pub(crate) fn supports_dry_run(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

fn texts(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

/// A selector as given; a missing one selects everything (`{}`).
fn selector(value: &Value) -> Value {
    if value.is_object() {
        value.clone()
    } else {
        Value::Object(Default::default())
    }
}

/// The webhooks of `phase` registered in `state`: configurations by name, entries in order.
pub(crate) fn registered(state: &State, phase: Phase) -> Vec<Webhook> {
    let key = (GROUP.to_string(), phase.plural().to_string());
    let Some(configurations) = state.objects(&key) else {
        return Vec::new();
    };
    let mut configurations: Vec<_> = configurations.values().collect();
    configurations.sort_by(|a, b| object::name(a).cmp(object::name(b)));
    configurations
        .into_iter()
        .flat_map(|configuration| {
            configuration["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |entry| Webhook::parse(phase, entry))
        })
        .collect()
}

/// Whether requests on this resource never reach webhooks: webhook configurations and
/// admission policies themselves, so that a bad webhook cannot lock out its own repair.
pub(crate) fn is_exempt(group: &str, plural: &str) -> bool {
    group == GROUP
        && matches!(
            plural,
            "validatingwebhookconfigurations"
                | "mutatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}
