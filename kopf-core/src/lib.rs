//! Kopf's programming model for Kubernetes operators, rebuilt on tokio and kube-client.
//!
//! Handlers react to objects' changes; the framework watches the resources, detects what
//! changed (Kopf's causes), calls the right handlers, retries failures, and keeps progress on
//! the objects in Kopf's own format, so a Python Kopf operator and a kopf-rs operator can take
//! turns on the same objects.
//!
//! ```no_run
//! use kopf::{Logger, Patch};
//! use serde_json::{Value, json};
//!
//! #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
//! async fn create_fn(name: &str, patch: &mut Patch, logger: &Logger) -> kopf::Result<Value> {
//!     logger.info(format_args!("creating {name}"));
//!     patch.status().insert("phase".into(), json!("Created"));
//!     Ok(json!({"message": "hello"})) // stored at status.create_fn
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     kopf::run().await // Kopf's command line: `run -n NAMESPACE`, `--help`
//! }
//! ```
//!
//! Everything the operator runs is a node of one cancellation tree: when `run` returns, no
//! task of it is left, and its connections are closed.
//!
//! # Where things are
//!
//! The crate's root holds what handler code writes every day: the attributes
//! (`#[kopf::on_create]` and the rest), the arguments most handlers take ([`Invocation`],
//! [`Patch`], [`Logger`], [`Events`], [`Memo`], [`Index`], [`Reason`], [`Stopped`] with its
//! [`StopReason`], [`Live`] views for daemons and timers, and [`Settings`] for startup
//! handlers), what handlers return ([`Result`],
//! [`Error`], [`TemporaryError`], [`PermanentError`], [`AdmissionError`]), Kopf's event
//! functions ([`event`], [`info`], [`warn`], [`exception`]), and the program's entry: [`run`],
//! or [`run_with`] a registry of the [`handlers!`] it names. [`prelude`] imports the most
//! common of them at once. The rest is grouped by what it is for:
//!
//! - running an operator inside a program or a test of one's own: [`operator`], and what it
//!   reports: [`outcomes`], [`metrics`];
//! - handlers declared in code instead of by attributes, and sub-handlers: [`registry`], with
//!   the [`resources`] they serve and their [`filters`];
//! - the kinds of handlers with types of their own: [`activities`], [`login`], [`admission`],
//!   [`indexes`];
//! - configuration: [`settings`], and where state is kept on objects: [`storage`];
//! - what handlers work with: [`diff`], and [`hierarchies`] for their children;
//! - deploying: [`rbac`], [`peering`];
//! - hooks for tests: [`testing`] (the test harness and the fake API server are the
//!   `kopf-testing` crate).
//!
#![doc = include_str!("../docs/handlers.md")]

// The layers, bottom up: each uses only those above it in this list (ARCHITECTURE.md).
mod actions;
mod aiokits;
mod clients;
mod configs;
mod engines;
mod helpers;
mod intents;
mod kits;
mod reactor;
mod structs;

// The root: what handler code writes every day.
pub use actions::current::register;
pub use actions::invocation::{Invocation, Reason};
pub use actions::live::Live;
pub use actions::posting::{event, exception, info, warn};
pub use actions::subexecution::execute;
pub use aiokits::tasks::{StopReason, Stopped};
pub use clients::posting::{Events, Logger};
pub use kits::cli::{run, run_with};
#[doc(no_inline)]
pub use settings::Settings;
pub use structs::errors::{
    AdmissionError, Error, HandlerRetriesError, HandlerTimeoutError, PermanentError, Result,
    TemporaryError,
};
pub use structs::indexes::Index;
pub use structs::memos::Memo;
pub use structs::patch::{Patch, PatchFn};

pub use kopf_macros::{
    daemon, index, on_cleanup, on_create, on_delete, on_event, on_field, on_login, on_mutate,
    on_probe, on_resume, on_startup, on_update, on_validate, timer,
};

// The rest, by what it is for; each module only re-exports.
pub use configs::storage;
pub use kits::hierarchies;
pub use structs::{diff, filters};

pub mod prelude {
    //! The handful of names that most handler code uses, for one glob import.
    //!
    //! ```
    //! use kopf::prelude::*;
    //! use serde_json::Value;
    //!
    //! #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
    //! async fn create_fn(spec: &Value, patch: &mut Patch, logger: &Logger) -> kopf::Result<()> {
    //!     if spec["size"].is_null() {
    //!         return Err(PermanentError::new("spec.size is required").into());
    //!     }
    //!     logger.info("creating");
    //!     patch.status().insert("size".into(), spec["size"].clone());
    //!     Ok(())
    //! }
    //!
    //! #[kopf::daemon("kopf.dev", "v1", "kopfexamples")]
    //! async fn monitor(stopped: Stopped, logger: &Logger) {
    //!     stopped.cancelled().await;
    //!     logger.info(format_args!("stopped: {:?}", stopped.reason()));
    //! }
    //! ```
    //!
    //! It leaves out [`Result`](crate::Result) and [`Error`](crate::Error), which would hide
    //! the standard library's `Result`: write `kopf::Result` and `kopf::Error`. It has only
    //! kopf's own names; `serde_json::Value` comes from serde_json.

    // Not `serde_json::Value`: a public path to it from here shows its `String` variant to
    // rustc's short names in diagnostics, and every error about a `String` in a user's crate
    // would then spell it `std::string::String` (the UI tests of kopf-macros show it).
    #[doc(no_inline)]
    pub use crate::{
        Index, Invocation, Logger, Memo, Patch, PermanentError, Settings, Stopped, TemporaryError,
    };
}

pub mod operator {
    //! Running an operator inside a program or a test of one's own, instead of the command
    //! line of [`run`](crate::run).
    //!
    //! An [`Operator`] is a [`Registry`](crate::registry::Registry) (of
    //! [`handlers!`](crate::handlers), or
    //! [`collected`](crate::registry::Registry::collected)), [`Settings`](crate::Settings),
    //! a memo and a client; it runs until its stop token is cancelled, and returns once all
    //! it started has ended. [`Operator::ready`] tells when every resource is listed;
    //! [`outcomes`](crate::outcomes) and [`metrics`](crate::metrics) are what it reports.
    //!
    //! ```no_run
    //! use kopf::operator::{Operator, OperatorError};
    //!
    //! #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
    //! async fn create_fn(name: &str) -> kopf::Result<serde_json::Value> {
    //!     Ok(serde_json::json!({"message": format!("hello {name}")}))
    //! }
    //!
    //! # async fn example() -> Result<(), OperatorError> {
    //! let stop = tokio_util::sync::CancellationToken::new();
    //! Operator::new(kopf::handlers![create_fn]).run(stop).await
    //! # }
    //! ```

    pub use crate::reactor::operator::{Operator, OperatorError, Ready};
}

pub mod registry {
    //! Handlers declared in code, for registries built explicitly (tests, embedding, handlers
    //! made at run time): what the attributes generate, written by hand.
    //!
    //! A [`Registry`] holds the handlers an operator runs: [`Registry::collected`] every
    //! `#[kopf::on_*]` function of the program, [`handlers!`](crate::handlers) the named ones,
    //! and `Registry::new().with(..)` declarations, one type per kind ([`ChangeHandler`],
    //! [`EventHandler`], [`DaemonHandler`], [`TimerHandler`], [`IndexHandler`],
    //! [`ActivityHandler`], [`LoginHandler`], [`AdmissionHandler`]), with the functions they
    //! take ([`HandlerFn`], [`WhenFn`], [`blocking`] for a sync function) and their options
    //! ([`Trigger`], [`ErrorsMode`], [`AdmissionKind`]). A handler registers sub-handlers while
    //! it runs with [`SubHandlers`] (Kopf's `@kopf.subhandler`), or runs them in place with
    //! [`execute`](crate::execute), or the registered ones with [`SubHandlers::execute`] (an
    //! [`Execution`] either way).
    //!
    //! ```
    //! use kopf::registry::{ChangeHandler, Registry};
    //! use kopf::resources::Selector;
    //!
    //! let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
    //! let create = ChangeHandler::on_create(examples, "create_fn", |invocation| async move {
    //!     tracing::info!(name = invocation.name(), "created");
    //!     Ok(Some(serde_json::json!({"message": "hello"})))
    //! });
    //! let registry = Registry::new().with(create);
    //! ```

    pub use crate::actions::blocking::blocking;
    pub use crate::actions::current::NoChangeHandler;
    pub use crate::actions::invocation::{
        ErrorsMode, HandlerFn, HandlerFuture, HandlerResult, SubHandler, SubHandlers, WhenFn,
    };
    pub use crate::actions::subexecution::Execution;
    pub use crate::intents::activities::ActivityHandler;
    pub use crate::intents::admission::{AdmissionHandler, AdmissionKind};
    pub use crate::intents::daemons::{DaemonHandler, TimerHandler};
    pub use crate::intents::handlers::{ChangeHandler, EventHandler, Trigger};
    pub use crate::intents::indexing::IndexHandler;
    pub use crate::intents::login::LoginHandler;
    pub use crate::intents::registry::{AnyHandler, Registry};
}

pub mod resources {
    //! Which resources handlers serve: the [`Selector`] that a handler declared in code names
    //! (what the attributes' first arguments become), [`EVERYTHING`], and the [`Resource`]
    //! that discovery found, which handlers can take as their `resource` argument.

    pub use crate::structs::resources::{EVERYTHING, Resource, ResourcePredicate, Selector};
}

pub mod activities {
    //! The operator's own handlers, outside any object (Kopf's activities):
    //! `#[kopf::on_startup]`, `#[kopf::on_cleanup]` and `#[kopf::on_probe]`.
    //!
    //! Such a handler may ask which [`Activity`] it serves; declared in code
    //! ([`ActivityHandler`](crate::registry::ActivityHandler)), its function gets an
    //! [`ActivityInvocation`]. Login handlers, activities too in Kopf, are in
    //! [`login`](crate::login).

    pub use crate::actions::activity::{Activity, ActivityInvocation};
}

pub mod login {
    //! Logging in to the API server: what `#[kopf::on_login]` handlers return
    //! ([`ConnectionInfo`], or a whole `kube::Config` as [`Credentials`]), the functions of
    //! login handlers declared in code ([`LoginHandler`](crate::registry::LoginHandler)), and
    //! [`LoginError`], why the operator could not log in.
    //!
    //! Without login handlers, the operator uses kube-client's own credentials (the kubeconfig
    //! or the in-cluster service account).

    //!
    //! A login handler may start from what Kopf's own logins read:
    //! [`login_with_kubeconfig`] and [`login_with_service_account`].

    pub use crate::actions::login::{LoginFn, LoginFuture, LoginResult};
    pub use crate::kits::logins::{login_with_kubeconfig, login_with_service_account};
    pub use crate::structs::credentials::{ConnectionInfo, Credentials, LoginError};
}

pub mod admission {
    //! Admission webhooks: what `#[kopf::on_validate]` and `#[kopf::on_mutate]` handlers get
    //! besides the object, and where the operator serves them.
    //!
    //! Handlers may take the request's [`Operation`], the caller's [`PeerCertificate`]
    //! (`sslpeer`), and [`Warnings`] to push; they deny a request with
    //! [`AdmissionError`](crate::AdmissionError), at the root with the other errors handlers
    //! return. [`AdmissionSettings`](crate::settings::AdmissionSettings) chooses the
    //! [`WebhookServer`] (with [`CertificateFiles`], or behind a [`WebhookService`]); the
    //! errors here say why serving the webhooks or managing their configurations failed.
    //! Handlers declared in code are [`AdmissionHandler`](crate::registry::AdmissionHandler)s.

    pub use crate::aiokits::tls::TlsError;
    pub use crate::configs::webhooks::{
        CertificateFiles, WebhookSecret, WebhookServer, WebhookService,
    };
    pub use crate::engines::configurations::ConfigurationError;
    pub use crate::engines::webhooks::WebhookError;
    pub use crate::structs::certificates::PeerCertificate;
    pub use crate::structs::reviews::{Operation, UnknownOperation, Warnings};
}

pub mod indexes {
    //! Kopf's in-memory indexes: what `#[kopf::index]` functions return, and what handlers
    //! read from an [`Index`](crate::Index) (at the root, since handlers take it).
    //!
    //! An index maps [`IndexKey`]s to [`Store`]s of [`IndexValue`]s, one value per object; an
    //! index function returns anything that is [`IntoIndexEntries`].

    pub use crate::structs::indexes::{IndexKey, IndexValue, IntoIndexEntries, Store};
}

pub mod settings {
    //! Every setting of an operator: [`Settings`] and its groups, with Kopf's names and
    //! defaults.
    //!
    //! A startup handler changes them before anything is watched (`settings: &mut
    //! kopf::Settings`); a program or a test of one's own gives them to
    //! [`Operator::settings`](crate::operator::Operator::settings). Each group is a field of
    //! [`Settings`] (`settings.watching` is a [`WatchingSettings`]); [`Lifecycle`] and
    //! [`LostLeadership`] are choices within them. Where the operator keeps its state on
    //! objects is in [`storage`](crate::storage).
    //!
    //! ```
    //! let mut settings = kopf::Settings::default();
    //! settings.execution.lifecycle = kopf::settings::Lifecycle::Asap;
    //! settings.process.grace_period = std::time::Duration::from_secs(5);
    //! ```

    pub use crate::configs::lifecycles::{CustomLifecycle, DueHandler, Lifecycle};
    pub use crate::configs::settings::{
        AdmissionSettings, ExecutionSettings, LeaseSettings, LostLeadership, NetworkingSettings,
        PeeringSettings, PersistenceSettings, PostingSettings, ProcessSettings, QueueingSettings,
        ScanningSettings, ServingSettings, Settings, ShardingSettings, WatchingSettings,
    };
}

pub mod rbac {
    //! The RBAC an operator needs, as the binary's `rbac` subcommand prints it.
    //!
    //! The framework knows what it does itself; what handlers do through their `client` they
    //! declare with `owns = [..]` and `reads = [..]` on their attributes, or with [`RbacRule`]s
    //! given to [`Registry::rbac_rule`](crate::registry::Registry::rbac_rule).
    //! [`rbac_manifest`] gives the subcommand's output to tests.

    pub use crate::kits::cli::rbac_manifest;
    pub use crate::structs::rbac::{OWNING_VERBS, READING_VERBS, RbacRule};
}

pub mod peering {
    //! Peering, leader election and shards: several operators, or replicas of one, serving the
    //! same objects.
    //!
    //! Kopf's peering (who pauses for whom, by priority) keeps its records in Kopf's own
    //! resources, whose CRDs [`peering_crds`] gives (the binary's `crd` subcommand prints
    //! them). The choices are [`settings`](crate::settings):
    //! [`PeeringSettings`](crate::settings::PeeringSettings); a Lease with
    //! [`LeaseSettings`](crate::settings::LeaseSettings) and
    //! [`LostLeadership`](crate::settings::LostLeadership); assigned shards with
    //! [`ShardingSettings`](crate::settings::ShardingSettings).

    pub use crate::kits::manifests::peering_crds;
}

pub mod metrics {
    //! The Prometheus endpoint: where [`Operator::metrics`](crate::operator::Operator::metrics)
    //! (`--metrics URL`) serves the operator's series, and why it could not.

    pub use crate::engines::metrics::{MetricsEndpoint, MetricsError};
}

pub mod outcomes {
    //! Each handler's last outcome on each object, kept in memory when asked for
    //! ([`Operator::outcomes`](crate::operator::Operator::outcomes)): what tests read, since
    //! the progress records leave the objects once they are handled (kopf-testing's
    //! `OperatorHarness::wait_for_outcome` reads them).

    pub use crate::structs::outcomes::{Failure, HandlerOutcome, Outcomes};
}

pub mod testing {
    //! Hooks for testing handlers without a whole operator. Most operators' tests need none of
    //! them: the `kopf-testing` crate runs operators against a fake API server.

    /// Serves one `AdmissionReview` (`body`, as kube-apiserver sends it) with the registry's
    /// admission handlers, as the operator's webhook server does for a call to
    /// `<path>/<handler_id>` (`None`: all the handlers of the request's resource): the HTTP
    /// status and the JSON answered. No server listens, and the resource is taken from the
    /// request as it is; `client` is what handlers get as their `client`.
    ///
    /// ```
    /// use serde_json::{Value, json};
    ///
    /// #[kopf::on_validate("kopf.dev", "v1", "kopfexamples")]
    /// fn check_size(spec: &Value) -> Result<(), kopf::AdmissionError> {
    ///     match spec["size"].as_i64() {
    ///         Some(size) if size > 10 => Err(kopf::AdmissionError::new("at most 10").code(422)),
    ///         _ => Ok(()),
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A client that handlers could call; this one has no server behind it.
    /// let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    /// let client = kube::Client::try_from(config).unwrap();
    /// let review = json!({
    ///     "apiVersion": "admission.k8s.io/v1",
    ///     "kind": "AdmissionReview",
    ///     "request": {
    ///         "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
    ///         "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
    ///         "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
    ///         "name": "one",
    ///         "namespace": "default",
    ///         "operation": "CREATE",
    ///         "userInfo": {"username": "alice"},
    ///         "object": {"kind": "KopfExample", "spec": {"size": 11}},
    ///     },
    /// });
    /// let body = serde_json::to_vec(&review).unwrap();
    /// let registry = kopf::handlers![check_size];
    /// let (status, answer) =
    ///     kopf::testing::review_admission(&registry, client, kopf::Memo::new(), body, None).await;
    /// assert_eq!(status, 200);
    /// assert_eq!(answer["response"]["allowed"], false);
    /// assert_eq!(answer["response"]["status"]["code"], 422);
    /// # }
    /// ```
    pub async fn review_admission(
        registry: &crate::registry::Registry,
        client: kube::Client,
        memo: crate::Memo,
        body: Vec<u8>,
        handler_id: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let request = crate::engines::admission::WebhookRequest {
            body: body.into(),
            handler_id: handler_id.map(str::to_owned),
            headers: http::HeaderMap::new(),
            peer_certificate: None,
        };
        let response =
            crate::engines::admission::review_once(registry, client, memo, request).await;
        (response.status.as_u16(), response.body)
    }
}

/// A [`Registry`](crate::registry::Registry) of the named `#[kopf::on_*]` functions, in the
/// order given: what tests and embedders use to run exactly the handlers they name.
///
/// ```
/// #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
/// async fn create_fn(name: &str) -> kopf::Result<serde_json::Value> {
///     Ok(serde_json::json!({"message": format!("hello {name}")}))
/// }
///
/// mod more {
///     #[kopf::on_delete("kopfexamples", optional)]
///     pub(crate) async fn delete_fn() {}
/// }
///
/// let registry = kopf::handlers![create_fn, more::delete_fn];
/// ```
#[macro_export]
macro_rules! handlers {
    ($($handler:path),* $(,)?) => {{
        #[allow(unused_mut, reason = "an empty list adds nothing")]
        let mut registry = $crate::registry::Registry::new();
        $($crate::__private::Extend::extend(
            &mut registry,
            <$handler as $crate::__private::Descriptor>::handlers(),
        );)*
        registry
    }};
}

/// Items that code generated by `kopf-macros` refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use std::boxed::Box;
    pub use std::iter::Extend;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{self, Err, Ok};
    pub use std::string::String;
    pub use std::time::Duration;
    pub use std::vec::Vec;
    pub use std::{concat, line, module_path, unreachable, vec};

    pub use inventory;
    pub use serde_json;

    pub use crate::actions::activity::{
        ActivityInvocation, ActivityScope, BorrowedActivityArgument, OwnedActivityArgument,
        SettingsSlot, blocking_activity,
    };
    pub use crate::actions::blocking::blocking;
    pub use crate::actions::extract::{
        BorrowedArgument, BorrowedTyped, Output, OwnedArgument, PatchSlot, RbacResource,
        ResultOutput, Scope, TypedResource, args, output, result_output,
    };
    pub use crate::actions::indexing::{ActivityIndexArgument, BorrowedActivityIndexArgument};
    pub use crate::actions::indexing::{
        BorrowedIndexArgument, IndexArgument, IndexDescriptor, IndexOf, IndexResult, index_output,
        index_result_output,
    };
    pub use crate::actions::invocation::{ErrorsMode, HandlerFuture, HandlerResult, Invocation};
    pub use crate::actions::login::{LoginFuture, LoginOutput, LoginResult, blocking_login};
    pub use crate::intents::activities::ActivityHandler;
    pub use crate::intents::admission::AdmissionHandler;
    pub use crate::intents::daemons::{DaemonHandler, TimerHandler};
    pub use crate::intents::handlers::{ChangeHandler, EventHandler};
    pub use crate::intents::indexing::IndexHandler;
    pub use crate::intents::login::LoginHandler;
    pub use crate::intents::registry::{AnyHandler, Collected, Descriptor};
    pub use crate::structs::filters::{MetaFilter, ValueFilter};
    pub use crate::structs::indexes::IntoIndexEntries;
    pub use crate::structs::resources::Selector;
    pub use crate::structs::reviews::Operation;
}
