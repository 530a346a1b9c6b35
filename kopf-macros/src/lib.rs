//! Attribute macros of kopf-rs. Use them through the `kopf` crate (`#[kopf::on_create]`),
//! which re-exports them; generated code refers only to `::kopf::__private`.
//!
//! Each attribute goes through three stages: `parse` reads the attribute's arguments and the
//! function as written, `validate` checks them against the handler kind and gathers every
//! mistake at once, `expand` emits the function unchanged plus its descriptor. On any error
//! the function is still emitted, so the rest of the crate keeps compiling and only the
//! mistakes are reported.
//!
//! The attributes, their options, the arguments handlers ask for and what their results do are
//! documented where users look: in the `kopf` crate's docs (`cargo doc -p kopf-core --open`,
//! section "Handlers").

use proc_macro::TokenStream;

mod expand;
mod kinds;
mod parse;
mod test_attr;
mod validate;

use kinds::Kind;

/// Run for objects found when the operator starts that it handled before (Kopf's
/// `@kopf.on.resume`). Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`,
/// `labels(..)`, `annotations(..)`, `when`, `field`, `value`, `deleted`, `owns`, `reads`,
/// `crate`; see the [handler reference in the `kopf` crate's docs](index.html#handlers) for
/// the syntax, the arguments and the results.
#[proc_macro_attribute]
pub fn on_resume(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Resume, args, item)
}

/// Run for objects created since the operator last handled them (Kopf's `@kopf.on.create`).
/// Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`, `labels(..)`,
/// `annotations(..)`, `when`, `field`, `value`, `owns`, `reads`, `crate`; see the
/// [handler reference](index.html#handlers).
#[proc_macro_attribute]
pub fn on_create(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Create, args, item)
}

/// Run when an object's essence changed (Kopf's `@kopf.on.update`). Options: as `on_create`,
/// plus `old` and `new` (with `field`).
#[proc_macro_attribute]
pub fn on_update(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Update, args, item)
}

/// Run when an object is deleted; the operator's finalizer holds the object until the
/// handler succeeds, unless `optional` (Kopf's `@kopf.on.delete`).
#[proc_macro_attribute]
pub fn on_delete(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Delete, args, item)
}

/// Run when a field changes (Kopf's `@kopf.on.field`); `field = "spec.x"` is required, and
/// `old`, `new`, `diff` are the field's.
#[proc_macro_attribute]
pub fn on_field(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Field, args, item)
}

/// Run for every watch event of the resource (Kopf's `@kopf.on.event`); errors are logged,
/// never retried. Options: `id`, `param`, `labels(..)`, `annotations(..)`, `when`, `field`,
/// `value`, `owns`, `reads`, `crate`. Arguments: the resource arguments, `patch`, `logger`,
/// `event`, `type` (`r#type`) or `event_type`, `param`, `resource`, `client`, `memo`, `events`,
/// and, as Kopf gives them for a first attempt, `retry` (0), `started` (now) and `runtime`
/// (nearly zero).
#[proc_macro_attribute]
pub fn on_event(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Event, args, item)
}

/// An index (Kopf's `@kopf.index`): the function runs for every event of the resource, and
/// what it returns for each object is kept in memory as a `kopf::Index<K, V>` that every
/// handler of the operator can take as an argument named after the function (its `id` is the
/// index's name for the plain API). It returns the object's entries: a map
/// (`BTreeMap<K, V>`, `HashMap<K, V>`), a `(K, V)` pair, a `Vec<(K, V)>`, or an `Option` of
/// one (`None` keeps the object's entries as they are), also inside a `Result`. Arbitrary
/// errors are logged and ignored by default. Options: `id`, `errors`, `timeout`, `retries`,
/// `backoff`, `param`, `labels(..)`, `annotations(..)`, `when`, `owns`, `reads`, `crate`.
/// Arguments: the resource arguments, `logger`, `retry`, `started`, `runtime`, `param`, `resource`,
/// `memo`, and `patch`, which is never applied (as in Kopf, whose index functions get a patch
/// that it drops: an index reads objects, it does not change them).
///
/// ```
/// use std::collections::BTreeMap;
///
/// #[kopf::index("v1", "pods")]
/// async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> Option<(String, String)> {
///     Some((labels.get("app")?.clone(), name))
/// }
///
/// #[kopf::on_create("kopfexamples")]
/// fn create_fn(pods_by_app: &kopf::Index<String, String>) -> usize {
///     pods_by_app.get("web").map_or(0, |pods| pods.len())
/// }
/// ```
#[proc_macro_attribute]
pub fn index(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Index, args, item)
}

/// A daemon (Kopf's `@kopf.daemon`): one long-running task per object, started when the object
/// is first seen and stopped (its `stopped` token cancelled) when the object is deleted, stops
/// passing the filters, or the operator exits. Options: `id`, `errors`, `timeout`, `retries`,
/// `backoff`, `param`, `labels(..)`, `annotations(..)`, `when`, `initial_delay`,
/// `cancellation_backoff` (how long after `stopped` before the daemon is dropped),
/// `cancellation_timeout` (how long to wait for a sync daemon's thread before abandoning it),
/// `owns`, `reads`, `crate`. Arguments: the resource arguments, `patch`, `logger`, `retry`, `started`,
/// `runtime`, `param`, `memo`, `events`, `client`, and `stopped`
/// (`&tokio_util::sync::CancellationToken`).
///
/// ```
/// #[kopf::daemon("kopfexamples", cancellation_backoff = "5s")]
/// async fn monitor(name: &str, stopped: &tokio_util::sync::CancellationToken) {
///     while !stopped.is_cancelled() {
///         tokio::select! {
///             _ = stopped.cancelled() => {}
///             _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {
///                 tracing::info!("{name} is still there");
///             }
///         }
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn daemon(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Daemon, args, item)
}

/// A timer (Kopf's `@kopf.timer`): called every `interval` for each object, never twice at
/// once. Options: `interval` (required), `initial_delay`, `idle` (run only after the object has
/// not changed for that long), `sharp` (on a fixed grid), `id`, `errors`, `timeout`,
/// `retries`, `backoff`, `param`, `labels(..)`, `annotations(..)`, `when`, `owns`, `reads`,
/// `crate`. Arguments: as `daemon`. A test can shorten the interval without changing the
/// handler: `settings.execution.interval_cap`.
///
/// ```
/// #[kopf::timer("kopfexamples", interval = "1m", idle = "30s")]
/// async fn check(spec: &serde_json::Value) -> serde_json::Value {
///     serde_json::json!({"checked": spec})
/// }
/// ```
#[proc_macro_attribute]
pub fn timer(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Timer, args, item)
}

/// Run before the operator watches anything (Kopf's `@kopf.on.startup`): retried until it
/// succeeds, and a failure for good stops the operator. It may change the operator's
/// settings (`settings: &mut kopf::Settings`) and memo. Options: `id`, `errors`, `timeout`,
/// `retries`, `backoff`, `param`, `crate`; `owns`, `reads`; see [activity handlers](index.html#activity-handlers) in the `kopf` crate's
/// docs.
#[proc_macro_attribute]
pub fn on_startup(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Startup, args, item)
}

/// Run once when the operator stops, after the handlers in flight stopped, within the
/// cleanup timeout (Kopf's `@kopf.on.cleanup`). Options: as `on_startup`.
#[proc_macro_attribute]
pub fn on_cleanup(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Cleanup, args, item)
}

/// Run when the liveness endpoint is asked, at most once per 10 seconds; the result is shown
/// there under the handler's id (Kopf's `@kopf.on.probe`). Options: as `on_startup`.
#[proc_macro_attribute]
pub fn on_probe(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Probe, args, item)
}

/// Give the operator's credentials, at the start and again whenever the API server answers
/// `401 Unauthorized` (Kopf's `@kopf.on.login`). The function returns `kopf::login::ConnectionInfo`
/// or `kube::Config`, an `Option` of either (`None`: no credentials from this handler), or a
/// `kopf::Result` of those. Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`,
/// `crate`; arguments: `logger`, `memo`, `param`, `retry`, `started`, `runtime`, `settings`, and
/// `activity` (always `kopf::activities::Activity::Authentication`, as in Kopf).
///
/// ```
/// #[kopf::on_login(retries = 3)]
/// async fn login_fn(logger: &kopf::Logger) -> kopf::Result<kopf::login::ConnectionInfo> {
///     let token = std::env::var("MY_TOKEN")?;
///     logger.info("logging in with MY_TOKEN");
///     Ok(kopf::login::ConnectionInfo::new("https://cluster.example:6443").token(token))
/// }
/// ```
#[proc_macro_attribute]
pub fn on_login(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Login, args, item)
}

/// A validating admission handler (Kopf's `@kopf.on.validate`): kube-apiserver calls the
/// operator's webhook server before it stores an object, and the handler allows the request
/// by returning, or denies it by returning an error (`kopf::AdmissionError` with a message and
/// a code). It runs once per request, never retried. Options: `id`, `operations = [CREATE,
/// UPDATE, DELETE, CONNECT]` (default: all), `subresource = "status"` (or `"*"`; default: the
/// main object), `persistent`, `side_effects`, `ignore_failures`, `param`, `labels(..)`,
/// `annotations(..)`, `when`, `field`, `value`, `category`, `owns`, `reads`, `crate`.
/// Arguments: the resource arguments, `logger`, `param`, `resource`, `client`, `memo`, `old`,
/// `new`, `diff`, and `operation`, `subresource`, `dryrun`, `userinfo`, `headers`, `sslpeer`,
/// `warnings`; `retry` (0), `started` (when the request came) and `runtime` as Kopf gives them
/// for a first attempt. No `patch`: use `on_mutate` to change the object.
///
/// ```
/// use kopf::admission::Warnings;
///
/// #[kopf::on_validate("kopfexamples", operations = [CREATE, UPDATE])]
/// fn check_size(spec: &serde_json::Value, warnings: &Warnings) -> Result<(), kopf::AdmissionError> {
///     match spec["size"].as_i64() {
///         Some(size) if size > 10 => Err(kopf::AdmissionError::new("spec.size is at most 10").code(422)),
///         Some(_) => Ok(()),
///         None => {
///             warnings.push("spec.size is missing; 1 is assumed");
///             Ok(())
///         }
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn on_validate(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Validate, args, item)
}

/// A mutating admission handler (Kopf's `@kopf.on.mutate`): as `on_validate`, and its `patch`
/// (`&mut kopf::Patch`) changes the object before it is stored (sent back to kube-apiserver as
/// a JSON patch). Mutating handlers are skipped for `DELETE` unless `operations = [DELETE]`.
/// Options and arguments: as `on_validate`, plus `patch`.
///
/// ```
/// #[kopf::on_mutate("kopfexamples", operations = [CREATE])]
/// fn default_size(spec: &serde_json::Value, patch: &mut kopf::Patch) {
///     if spec["size"].is_null() {
///         patch.set("spec.size", 1);
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn on_mutate(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Mutate, args, item)
}

/// An `async fn` test with a started `kopf_testing::OperatorHarness`; use it as
/// `#[kopf_testing::test]`, which documents it.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    match syn::parse::<syn::ItemFn>(item.clone()) {
        Ok(function) => test_attr::expand(args.into(), function).into(),
        Err(error) => {
            let mut output = TokenStream::from(error.to_compile_error());
            output.extend(item);
            output
        }
    }
}

fn handler(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let mut function = match syn::parse::<syn::ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let mut output = TokenStream::from(error.to_compile_error());
            output.extend(item);
            return output;
        }
    };
    let args = proc_macro2::TokenStream::from(args);
    let krate = parse::crate_path(&args);
    // Handler attributes stacked under this one are registered here, all of them, as Kopf's
    // stacked decorators are: this is the only expansion that sees them all.
    let stacked = validate::take_stacked(&mut function);
    let handlers = stacked.and_then(|stacked| {
        let expanded = validate::Registration {
            kind,
            args,
            site: proc_macro2::Span::call_site(),
        };
        validate::handlers(
            std::iter::once(expanded).chain(stacked).collect(),
            &function,
        )
    });
    expand::handlers(handlers, krate, function).into()
}
