//! The managed webhook configurations (Kopf's `settings.admission.managed`): one
//! `ValidatingWebhookConfiguration` and one `MutatingWebhookConfiguration`, both named as the
//! setting says, whose webhooks the operator derives from its admission handlers.
//!
//! Invariants:
//! 1. The configurations are written only while the operator is not paused: with peering or a
//!    Lease, only the operator that serves (the leader) writes them, within its term. It
//!    writes them again whenever it resumes, since the previous leader's server is gone.
//! 2. Each write creates the objects if they are missing (`409` ignored), then merge-patches `{"webhooks":
//!    [...]}`, which replaces the whole list: foreign entries are lost, as in Kopf. A `403`
//!    of either ends the operator with an error naming the RBAC it needs: retrying would not
//!    grant it.
//! 3. The list is written again when the server's client config changes (a new certificate)
//!    or the discovered resources change (the rules name them), and only when it differs from
//!    what this operator wrote last.
//! 4. At a graceful stop ([`Configurations::shrink`]), if this operator wrote the lists (or
//!    began to: a write cut short counts) and still may write, they are patched down to the
//!    handlers marked `persistent`; the objects themselves stay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::aiokits::tasks::Tasks;
use crate::configs::webhooks::ClientConfig;
use crate::engines::pausing::Pause;
use crate::helpers::sync::lock;
use crate::intents::admission::{AdmissionHandler, AdmissionKind};
use crate::structs::resources::Resource;

/// Kubernetes' maximum, so that slow handlers are not cut short.
const TIMEOUT_SECONDS: u64 = 30;

/// Why the managed configurations cannot be kept.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ConfigurationError {
    /// The API refused to create or patch a configuration for lack of permissions.
    #[error(
        "cannot {verb} the {kind} {name:?}: forbidden; the operator's RBAC needs `create` and \
         `patch` on validatingwebhookconfigurations and mutatingwebhookconfigurations \
         (admissionregistration.k8s.io): see the `rbac` subcommand's --admission-managed"
    )]
    Forbidden {
        /// What was refused: `create` or `patch`.
        verb: &'static str,
        /// The configuration's kind.
        kind: &'static str,
        /// The managed name.
        name: String,
    },
    /// The managed name cannot make webhook names.
    #[error(
        "invalid managed webhook configuration name {0:?}: it must be a DNS subdomain of at \
         least two segments, e.g. auto.kopf.dev (webhook names need three)"
    )]
    Name(String),
}

/// Checks the managed name: a lowercase DNS subdomain of at least two segments, so that
/// every webhook name (`<id>.<managed>`) has the three that Kubernetes requires.
pub(crate) fn check_name(name: &str) -> Result<(), ConfigurationError> {
    let segment_ok = |segment: &str| {
        !segment.is_empty()
            && segment.len() <= 63
            && segment
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !segment.starts_with('-')
            && !segment.ends_with('-')
    };
    let segments: Vec<&str> = name.split('.').collect();
    if name.len() > 253 || segments.len() < 2 || !segments.iter().all(|s| segment_ok(s)) {
        return Err(ConfigurationError::Name(name.to_string()));
    }
    Ok(())
}

/// One of the two configuration kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Kind {
    admission: AdmissionKind,
    name: &'static str,
    plural: &'static str,
}

const KINDS: [Kind; 2] = [
    Kind {
        admission: AdmissionKind::Validating,
        name: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
    },
    Kind {
        admission: AdmissionKind::Mutating,
        name: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
    },
];

impl Kind {
    fn path(&self, name: Option<&str>) -> String {
        let collection = format!("/apis/admissionregistration.k8s.io/v1/{}", self.plural);
        match name {
            Some(name) => format!("{collection}/{name}"),
            None => collection,
        }
    }
}

/// The webhooks of one configuration kind: one per handler of that kind (only the persistent
/// ones when asked), as Kopf's `build_webhooks` makes them.
pub(crate) fn webhooks(
    handlers: &[AdmissionHandler],
    kind: AdmissionKind,
    resources: &[Resource],
    managed: &str,
    config: &ClientConfig,
    persistent_only: bool,
) -> Vec<Value> {
    handlers
        .iter()
        .filter(|handler| handler.kind() == kind)
        .filter(|handler| !persistent_only || handler.is_persistent())
        .map(|handler| webhook(handler, resources, managed, config))
        .collect()
}

fn webhook(
    handler: &AdmissionHandler,
    resources: &[Resource],
    managed: &str,
    config: &ClientConfig,
) -> Value {
    let operations: Vec<&str> = match handler.operations_set() {
        Some(operations) => operations.iter().map(|op| op.as_str()).collect(),
        None => vec!["*"],
    };
    let rules: Vec<Value> = handler
        .selector()
        .select(resources)
        .into_iter()
        .map(|resource| {
            let plural = match handler.subresource_name() {
                None => resource.plural.clone(),
                Some(sub) => format!("{}/{sub}", resource.plural),
            };
            json!({
                "apiGroups": [resource.group],
                "apiVersions": [resource.version],
                "resources": [plural],
                "operations": operations,
                "scope": "*",
            })
        })
        .collect();
    let mut webhook = json!({
        "name": webhook_name(handler.id(), managed),
        "sideEffects": if handler.has_side_effects() { "NoneOnDryRun" } else { "None" },
        "failurePolicy": if handler.ignores_failures() { "Ignore" } else { "Fail" },
        "matchPolicy": "Equivalent",
        "rules": rules,
        "clientConfig": config.for_handler(handler.id()),
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    let requirements = handler.label_requirements();
    if !requirements.is_empty() {
        webhook["objectSelector"] = json!({"matchExpressions": requirements});
    }
    webhook
}

/// A webhook's name: the handler's id normalized as Kopf does (`/` → `.`, `_` → `-`, any
/// other character but word characters, `.` and `-` → the hex of its UTF-8), then `.` and
/// the managed name.
pub(crate) fn webhook_name(id: &str, managed: &str) -> String {
    let mut name = String::new();
    for c in id.chars() {
        match c {
            '/' => name.push('.'),
            '_' => name.push('-'),
            c if c.is_alphanumeric() || c == '.' || c == '-' => name.push(c),
            c => {
                let mut buffer = [0u8; 4];
                for byte in c.encode_utf8(&mut buffer).bytes() {
                    name.push_str(&format!("{byte:02x}"));
                }
            }
        }
    }
    format!("{name}.{managed}")
}

/// The managed configurations of a running operator.
#[derive(Debug)]
pub(crate) struct Configurations {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    handlers: Vec<AdmissionHandler>,
    managed: String,
    config: watch::Receiver<ClientConfig>,
    resources: watch::Receiver<Vec<Resource>>,
    pause: Pause,
    /// The lists as last written, validating then mutating; `None` until written.
    written: Mutex<Option<[Vec<Value>; 2]>>,
    /// Whether a list may have been written since this operator last resumed, even if the
    /// write did not finish (one kind patched, the other failed or cancelled): then the stop
    /// shrinks them, so that no webhook is left pointing at a server that is gone.
    touched: AtomicBool,
    backoffs: Vec<Duration>,
    /// Set when the operator must stop (for lack of RBAC).
    failure: watch::Sender<Option<ConfigurationError>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Configurations")
            .field("managed", &self.managed)
            .finish_non_exhaustive()
    }
}

/// What the configurations are made of, before they are kept.
pub(crate) struct Managed {
    /// The operator's client.
    pub(crate) client: kube::Client,
    /// The admission handlers, in registration order.
    pub(crate) handlers: Vec<AdmissionHandler>,
    /// The configurations' name.
    pub(crate) managed: String,
    /// Whether the operator is paused (then it writes nothing).
    pub(crate) pause: Pause,
    /// Delays between retries of failed writes.
    pub(crate) backoffs: Vec<Duration>,
}

impl Configurations {
    /// Starts keeping the configurations, for the server's client config and the discovered
    /// resources, in a task of `tasks`.
    pub(crate) fn start(
        managed: Managed,
        config: watch::Receiver<ClientConfig>,
        resources: watch::Receiver<Vec<Resource>>,
        tasks: &Tasks,
    ) -> Configurations {
        let inner = Arc::new(Inner {
            client: managed.client,
            handlers: managed.handlers,
            managed: managed.managed,
            config,
            resources,
            pause: managed.pause.clone(),
            written: Mutex::new(None),
            touched: AtomicBool::new(false),
            backoffs: managed.backoffs,
            failure: watch::Sender::new(None),
        });
        tasks.spawn(inner.clone().keep(managed.pause, tasks.token().clone()));
        Configurations { inner }
    }

    /// Resolves when the configurations cannot be kept and the operator must stop; never
    /// otherwise.
    pub(crate) async fn failed(&self) -> ConfigurationError {
        let mut failure = self.inner.failure.subscribe();
        let error = match failure.wait_for(Option::is_some).await {
            Ok(error) => error.clone(),
            Err(_) => None,
        };
        match error {
            Some(error) => error,
            None => std::future::pending().await,
        }
    }

    /// Patches the lists down to the persistent handlers' webhooks, if this operator wrote
    /// them (or began to) and may still write: a step of the graceful stop, before the
    /// server stops. The task that keeps them must be stopped first.
    pub(crate) async fn shrink(&self, timeout: Duration) {
        let inner = &self.inner;
        if !inner.touched.load(Ordering::SeqCst) || inner.pause.is_paused() {
            return;
        }
        let config = inner.config.borrow().clone();
        let resources = inner.resources.borrow().clone();
        tracing::info!(target: "kopf::admission", "removing the non-persistent webhooks from {}", inner.managed);
        for kind in KINDS {
            let webhooks = webhooks(
                &inner.handlers,
                kind.admission,
                &resources,
                &inner.managed,
                &config,
                true,
            );
            match tokio::time::timeout(timeout, inner.patch(kind, webhooks)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(target: "kopf::admission", %error, "cannot remove the non-persistent webhooks from the {} {}", kind.name, inner.managed);
                }
                Err(_) => {
                    tracing::warn!(target: "kopf::admission", "removing the non-persistent webhooks from the {} {} took over {timeout:?}: left as they are", kind.name, inner.managed);
                }
            }
        }
    }
}

impl Inner {
    /// Writes the lists whenever they change and the operator may write, until cancelled.
    async fn keep(self: Arc<Self>, mut pause: Pause, token: CancellationToken) {
        let mut config = self.config.clone();
        let mut resources = self.resources.clone();
        let mut failures = 0usize;
        let mut created = false;
        let (mut config_open, mut resources_open) = (true, true);
        loop {
            if !pause.is_paused() {
                match self.write(&mut created).await {
                    Ok(()) => failures = 0,
                    Err(Failure::Fatal(error)) => {
                        tracing::error!(target: "kopf::admission", "{error}");
                        self.failure.send_replace(Some(error));
                        return;
                    }
                    Err(Failure::Transient(error)) => {
                        let delay = self
                            .backoffs
                            .get(failures)
                            .or(self.backoffs.last())
                            .copied()
                            .unwrap_or(Duration::from_secs(1));
                        failures += 1;
                        tracing::warn!(target: "kopf::admission", %error, "cannot write the webhook configurations {}; retrying in {delay:?}", self.managed);
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => continue,
                            _ = token.cancelled() => return,
                        }
                    }
                }
            }
            // A sender gone (a server whose certificate never changes, a discovery that is
            // done) means no more changes from it, not the end.
            tokio::select! {
                _ = token.cancelled() => return,
                changed = config.changed(), if config_open => config_open = changed.is_ok(),
                changed = resources.changed(), if resources_open => {
                    resources_open = changed.is_ok();
                }
                now_paused = pause.changed() => {
                    if !now_paused {
                        // Another leader may have written its own server's address meanwhile.
                        *lock(&self.written) = None;
                        self.touched.store(false, Ordering::SeqCst);
                        created = false;
                    }
                }
            }
        }
    }

    /// Creates the configurations if needed and patches what changed since the last write.
    async fn write(&self, created: &mut bool) -> Result<(), Failure> {
        let config = self.config.borrow().clone();
        let resources = self.resources.borrow().clone();
        let lists = KINDS.map(|kind| {
            webhooks(
                &self.handlers,
                kind.admission,
                &resources,
                &self.managed,
                &config,
                false,
            )
        });
        if lock(&self.written).as_ref() == Some(&lists) {
            return Ok(());
        }
        if !*created {
            for kind in KINDS {
                self.create(kind).await?;
            }
            *created = true;
        }
        tracing::info!(target: "kopf::admission", "configuring the webhooks of {}", self.managed);
        self.touched.store(true, Ordering::SeqCst);
        for (kind, webhooks) in KINDS.into_iter().zip(lists.clone()) {
            match self.patch(kind, webhooks).await {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    return Err(Failure::Fatal(ConfigurationError::Forbidden {
                        verb: "patch",
                        kind: kind.name,
                        name: self.managed.clone(),
                    }));
                }
                Err(error) => {
                    if matches!(&error, kube::Error::Api(status) if status.code == 404) {
                        // Deleted by someone: created again at the retry.
                        *created = false;
                    }
                    return Err(Failure::Transient(error));
                }
            }
        }
        *lock(&self.written) = Some(lists);
        Ok(())
    }

    /// Creates one configuration, empty; one that exists already is fine.
    async fn create(&self, kind: Kind) -> Result<(), Failure> {
        let body = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind.name,
            "metadata": {"name": self.managed},
        });
        let request = http::Request::post(kind.path(None))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .map_err(|error| Failure::Transient(kube::Error::HttpError(error)))?;
        match self.client.request::<Value>(request).await {
            Ok(_) => {
                tracing::info!(target: "kopf::admission", "created the {} {}", kind.name, self.managed);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Err(Failure::Fatal(ConfigurationError::Forbidden {
                    verb: "create",
                    kind: kind.name,
                    name: self.managed.clone(),
                }))
            }
            Err(error) => Err(Failure::Transient(error)),
        }
    }

    /// Replaces one configuration's webhooks.
    async fn patch(&self, kind: Kind, webhooks: Vec<Value>) -> Result<(), kube::Error> {
        let body = json!({"webhooks": webhooks});
        let request = http::Request::patch(kind.path(Some(&self.managed)))
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .map_err(kube::Error::HttpError)?;
        self.client.request::<Value>(request).await.map(|_| ())
    }
}

/// Why a write failed.
#[derive(Debug)]
enum Failure {
    /// Retried after a backoff.
    Transient(kube::Error),
    /// Ends the operator.
    Fatal(ConfigurationError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs::webhooks::WebhookServer;
    use crate::structs::filters::MetaFilter;
    use crate::structs::resources::Selector;
    use crate::structs::reviews::Operation;

    fn resource(group: &str, version: &str, plural: &str) -> Resource {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            ..Resource::default()
        }
    }

    fn resources() -> Vec<Resource> {
        vec![
            Resource {
                preferred: true,
                ..resource("kopf.dev", "v1", "kopfexamples")
            },
            resource("kopf.dev", "v2", "kopfexamples"),
            resource("", "v1", "pods"),
        ]
    }

    fn config() -> ClientConfig {
        WebhookServer::new()
            .addr("127.0.0.1".parse().unwrap())
            .client_config(9443, Some("PEM".into()))
    }

    fn validating(id: &str) -> AdmissionHandler {
        AdmissionHandler::validating(Selector::named("kopfexamples.kopf.dev"), id, |_| async {
            Ok(None)
        })
    }

    #[test]
    fn names_are_kopfs_normalized_ids_under_the_managed_name() {
        assert_eq!(
            webhook_name("check", "auto.kopf.dev"),
            "check.auto.kopf.dev"
        );
        assert_eq!(
            webhook_name("check_size/spec.x", "auto.kopf.dev"),
            "check-size.spec.x.auto.kopf.dev"
        );
        assert_eq!(webhook_name("id!", "a.b"), "id21.a.b");
        assert_eq!(webhook_name("a b:c", "a.b"), "a20b3ac.a.b");
        assert_eq!(
            webhook_name("Über", "a.b"),
            "Über.a.b",
            "word characters stay"
        );
        assert_eq!(
            webhook_name("a\u{2603}", "a.b"),
            "ae29883.a.b",
            "UTF-8 bytes in hex"
        );
    }

    #[test]
    fn managed_names_need_two_dns_segments() {
        assert!(check_name("auto.kopf.dev").is_ok());
        assert!(check_name("kopf.dev").is_ok());
        for bad in [
            "kopf",
            "Auto.kopf.dev",
            "auto..dev",
            "-a.dev",
            "a_b.dev",
            "",
        ] {
            let error = check_name(bad).unwrap_err().to_string();
            assert!(error.contains("at least two segments"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_webhook_has_kopfs_fields_and_a_rule_per_matching_resource() {
        let every_version = Selector::matching(|r| r.plural == "kopfexamples");
        let handler =
            AdmissionHandler::validating(every_version, "check_size", |_| async { Ok(None) })
                .operations([Operation::Update, Operation::Create]);
        let hooks = webhooks(
            &[handler],
            AdmissionKind::Validating,
            &resources(),
            "auto.kopf.dev",
            &config(),
            false,
        );
        assert_eq!(
            hooks,
            [json!({
                "name": "check-size.auto.kopf.dev",
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "rules": [
                    {"apiGroups": ["kopf.dev"], "apiVersions": ["v1"], "resources": ["kopfexamples"],
                     "operations": ["CREATE", "UPDATE"], "scope": "*"},
                    {"apiGroups": ["kopf.dev"], "apiVersions": ["v2"], "resources": ["kopfexamples"],
                     "operations": ["CREATE", "UPDATE"], "scope": "*"},
                ],
                "clientConfig": {"url": "https://127.0.0.1:9443/check_size", "caBundle": "UEVN"},
                "timeoutSeconds": 30,
                "admissionReviewVersions": ["v1", "v1beta1"],
            })]
        );
    }

    #[test]
    fn subresources_side_effects_and_failures_shape_the_webhook() {
        let status = validating("status").subresource("status");
        let every = validating("every").subresource("*").side_effects();
        let relaxed = validating("relaxed").ignore_failures();
        let pods = AdmissionHandler::mutating(Selector::new("", "v1", "pods"), "pods", |_| async {
            Ok(None)
        });
        let handlers = [status, every, relaxed, pods];
        let hooks = webhooks(
            &handlers,
            AdmissionKind::Validating,
            &resources()[..1],
            "a.b",
            &config(),
            false,
        );
        let first = |hook: &Value, field: &str| hook["rules"][0][field].clone();
        assert_eq!(hooks.len(), 3, "only the validating ones");
        assert_eq!(
            first(&hooks[0], "resources"),
            json!(["kopfexamples/status"])
        );
        assert_eq!(first(&hooks[0], "operations"), json!(["*"]));
        assert_eq!(first(&hooks[1], "resources"), json!(["kopfexamples/*"]));
        assert_eq!(hooks[1]["sideEffects"], "NoneOnDryRun");
        assert_eq!(hooks[2]["failurePolicy"], "Ignore");
        let mutating = webhooks(
            &handlers,
            AdmissionKind::Mutating,
            &resources(),
            "a.b",
            &config(),
            false,
        );
        assert_eq!(mutating.len(), 1);
        assert_eq!(mutating[0]["rules"][0]["apiGroups"], json!([""]));
        assert_eq!(mutating[0]["rules"][0]["resources"], json!(["pods"]));
    }

    #[test]
    fn label_filters_but_callables_make_the_object_selector() {
        let handler = validating("labelled")
            .label("present", MetaFilter::Present)
            .label("absent", MetaFilter::Absent)
            .label("value", "yes".into())
            .label("judged", MetaFilter::callable(|_| true));
        let hooks = webhooks(
            &[handler],
            AdmissionKind::Validating,
            &[],
            "a.b",
            &config(),
            false,
        );
        assert_eq!(
            hooks[0]["objectSelector"],
            json!({"matchExpressions": [
                {"key": "absent", "operator": "DoesNotExist"},
                {"key": "present", "operator": "Exists"},
                {"key": "value", "operator": "In", "values": ["yes"]},
            ]})
        );
        assert_eq!(hooks[0]["rules"], json!([]), "no resource discovered yet");
        let plain = webhooks(
            &[validating("plain")],
            AdmissionKind::Validating,
            &[],
            "a.b",
            &config(),
            false,
        );
        assert!(
            plain[0].get("objectSelector").is_none(),
            "no selector: every object"
        );
    }

    #[test]
    fn at_the_stop_only_persistent_webhooks_are_kept_and_services_get_the_id_in_their_path() {
        let handlers = [validating("kept").persistent(), validating("dropped")];
        let service = WebhookServer::service("ops", "op")
            .path("/hooks")
            .client_config(9443, None);
        let hooks = webhooks(
            &handlers,
            AdmissionKind::Validating,
            &[],
            "a.b",
            &service,
            true,
        );
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0]["name"], "kept.a.b");
        assert_eq!(
            hooks[0]["clientConfig"],
            json!({"service": {"namespace": "ops", "name": "op", "port": 443, "path": "/hooks/kept"}})
        );
    }
}
