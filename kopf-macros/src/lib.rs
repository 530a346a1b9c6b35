//! Attribute macros of kopf-rs. Use them through the `kopf` crate (`#[kopf::on_create]`),
//! which re-exports them; generated code refers only to `::kopf::__private`.
//!
//! Each attribute goes through three stages: `parse` reads the attribute's arguments and the
//! function as written, `validate` checks them against the handler kind and gathers every
//! mistake at once, `expand` emits the function unchanged plus its descriptor. On any error
//! the function is still emitted, so the rest of the crate keeps compiling and only the
//! mistakes are reported.
//!
//! # Writing a handler
//!
//! ```
//! use kopf::Patch;
//! use serde_json::{Value, json};
//!
//! #[kopf::on_create("kopf.dev", "v1", "kopfexamples", timeout = "10m", retries = 5)]
//! async fn create_fn(spec: &Value, name: &str, patch: &mut Patch) -> kopf::Result<Value> {
//!     patch.status().insert("phase".into(), json!("Created"));
//!     Ok(json!({"message": format!("hello {name}: {spec}")}))
//! }
//!
//! #[kopf::on_field("kopfexamples", field = "spec.replicas", new = present)]
//! async fn scale(old: Option<i64>, new: Option<i64>, logger: &kopf::Logger) {
//!     logger.info(format_args!("scaling from {old:?} to {new:?}"));
//! }
//!
//! let registry = kopf::handlers![create_fn, scale]; // or kopf::Registry::collected()
//! ```
//!
//! ## The resource
//!
//! First, as in Kopf: `("kopf.dev", "v1", "kopfexamples")` (group, version, plural);
//! `("kopf.dev/v1", "kopfexamples")`, `("kopf.dev", "kopfexamples")` or `("v1", "pods")`
//! (a name in a group or version, see `Selector::named_in`); `("kopfexamples")`, `("kex")`,
//! `("KopfExample")` or `("kopfexamples.kopf.dev")` (any name, resolved through discovery,
//! see `Selector::named`); a type implementing `kube::Resource<DynamicType = ()>`, e.g. a
//! `#[derive(CustomResource)]` type (`#[kopf::on_create(KopfExample)]`); `kopf::EVERYTHING`;
//! or the option `category = "all"`.
//!
//! ## Options
//!
//! | option | kinds | meaning |
//! |---|---|---|
//! | `id = "name"` | all | the handler id (default: the function's name; `on_field` and `field = ...` append `/field`) |
//! | `errors = "temporary"` \| `"permanent"` \| `"ignored"` | change, `index` | what an arbitrary error does |
//! | `timeout = "10s"`, `backoff = 1.5` | change, `index` | durations: seconds as numbers, or strings with `ms`, `s`, `m`, `h` (`"1m30s"`), or any `Duration` expression |
//! | `retries = 3` | change, `index` | give up after this many attempts |
//! | `param = {"any": "json"}` | all | the `param` argument, written as in `serde_json::json!` |
//! | `labels("app" = "web", tier = present, "legacy" = absent, "x" = \|v\| ...)` | all | label filters: a value, `present`, `absent`, or a `Fn(Option<&str>) -> bool` |
//! | `annotations(...)` | all | the same for annotations |
//! | `when = path::to::predicate` | all | a `Fn(&kopf::Invocation) -> bool` |
//! | `field = "spec.x"` | change (required by `on_field`) | narrows the handler to the field |
//! | `value = ...`, `old = ...`, `new = ...` | change; `old`/`new` on `on_update`, `on_field` | field filters: JSON (`1`, `"x"`, `{"a": 1}`, `null`), `present`, `absent`, or a `Fn(Option<&Value>) -> bool`; they need `field` |
//! | `optional` | `on_delete` | do not block deletion with a finalizer |
//! | `deleted` | `on_resume` | also resume objects being deleted |
//! | `initial_delay = "1s"` | `daemon`, `timer` | wait this long after the object is first seen |
//! | `cancellation_backoff = "5s"` | `daemon` | after `stopped`, how long the daemon may take to return before it is dropped |
//! | `cancellation_timeout = "1m"` | `daemon` | for a sync daemon: how long to wait for its thread before abandoning it |
//! | `interval = "1m"` | `timer` (required) | how often the timer runs |
//! | `idle = "30s"` | `timer` | run only once the object has not changed for that long |
//! | `sharp` | `timer` | run on a fixed grid of intervals, however long runs take |
//! | `leader_only` | `on_startup`, `on_cleanup` | run only on the leader of the Lease (`kopf::ActivityHandler::leader_only`) |
//! | `crate = path` | all | where the `kopf` crate is, when it is renamed |
//!
//! A value is read as a Rust expression when it is one, otherwise as tokens up to the next
//! comma; a generic call with commas outside parentheses (`f::<A, B>()`) must be wrapped in
//! parentheses or braces.
//!
//! ## Arguments, by name, converted by type
//!
//! Ask for any subset, in any order. A parameter whose type is written as a reference
//! borrows from the invocation; any other type is converted, and JSON parts are
//! deserialized: a value that does not fit the type is a `kopf::PermanentError` naming the
//! argument and the type. A leading underscore (`_name`) asks for the same argument
//! without an unused-variable warning.
//!
//! | name | borrowed | owned |
//! |---|---|---|
//! | `body`, `spec`, `meta`, `status`, `labels`, `annotations` | `&serde_json::Value` as it is, or `&T` of any `DeserializeOwned` type (`body: &KopfExample`, deserialized once for the call) | any `DeserializeOwned` type (`MySpec`, `Option<MyStatus>`, `BTreeMap<String, String>`; absent labels are empty) |
//! | `old`, `new`, `param` | `Option<&serde_json::Value>` | any `DeserializeOwned` type (`Option<i64>`: `None` when absent) |
//! | `name`, `uid` | `&str` | `String` |
//! | `namespace`, `event_type` | `Option<&str>` | `Option<String>` |
//! | `diff` | `&kopf::diff::Diff` | `kopf::diff::Diff` |
//! | `patch` | `&mut kopf::Patch` (merged into the object's patch after the call) | — |
//! | `logger` | `&kopf::Logger`, `&tracing::Span` | `kopf::Logger`, `tracing::Span` |
//! | `reason` | — | `kopf::Reason`, `Option<kopf::Reason>` |
//! | `retry` | — | `u32`, `u64`, `usize` |
//! | `started` | — | `time::OffsetDateTime`, `std::time::SystemTime` |
//! | `runtime` | — | `std::time::Duration` |
//! | `resource` | `&kopf::Resource` | `kopf::Resource` |
//! | `client` | `&kube::Client` | `kube::Client` |
//! | `memo` | `&kopf::Memo` | `kopf::Memo` (a handle to the same memo) |
//! | `events` | `&kopf::Events` | `kopf::Events` |
//! | `stopped` | `&tokio_util::sync::CancellationToken` | `tokio_util::sync::CancellationToken`, or `kopf::Stopped` (which also tells why) |
//! | `subhandlers` | `&kopf::SubHandlers` | `kopf::SubHandlers` (a handle to the same registrations) |
//!
//! Change handlers (`on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`) get all
//! but `event_type` and `stopped`; `on_event` handlers get all but `diff`, `old`, `new`,
//! `reason`, `retry`, `started`, `runtime`, `stopped`, `subhandlers`; daemons and timers get
//! all but `diff`, `old`, `new`, `reason`, `event_type`, `subhandlers`. A name the kind does not
//! get, or a type the name does not convert to, is a compile error at that parameter.
//!
//! Any other name takes an index: the one built by the `#[kopf::index]` function of that
//! name, which must be in scope, as `&kopf::Index<K, V>` or `kopf::Index<K, V>` with the types
//! it returns. A misspelt index is not found in scope, and an index of other types does not
//! convert: both are compile errors at the parameter.
//!
//! ## Results
//!
//! Chosen by the return type as written: none stores nothing; a type whose last path segment
//! is `Result` (`kopf::Result<T>`, `std::io::Result<T>`, `Result<T, MyError>`) must be
//! `std::result::Result<T, E>` or an alias of it, with `T: Serialize` and `E: Into<kopf::Error>`
//! (any `std::error::Error + Send + Sync + 'static`); any other type must be `Serialize`.
//! A value is stored at `status.<handler-id>`; `()` and `None` store nothing.
//!
//! ## Activity handlers
//!
//! `on_startup`, `on_cleanup` and `on_probe` serve the operator itself: they take no
//! resource, only the options `id`, `errors`, `timeout`, `retries`, `backoff`, `param` and
//! `crate`, and their arguments are `activity` (`kopf::Activity`), `logger`, `memo`, `retry`,
//! `started`, `runtime`, `param`, `client` (in the forms above), and for `on_startup` only,
//! `settings` (`&mut kopf::Settings` to change the operator's settings, or `kopf::Settings`
//! for a copy).
//!
//! ```
//! #[kopf::on_startup(retries = 3, backoff = 1)]
//! async fn configure(settings: &mut kopf::Settings, memo: &kopf::Memo) -> kopf::Result<()> {
//!     settings.posting.enabled = false;
//!     memo.set("region", "eu-1");
//!     Ok(())
//! }
//!
//! #[kopf::on_probe(id = "now")]
//! async fn now() -> String {
//!     "alive".into()
//! }
//! ```
//!
//! ## Sync handlers
//!
//! A plain `fn` is a sync handler: it runs on the operator's own threads (`kopf::blocking`),
//! with the same arguments and results.
//!
//! ## Registration
//!
//! Each handler is registered automatically (`kopf::Registry::collected()`), and can be named
//! in an explicit registry: `kopf::handlers![create_fn, module::update_fn]`. The attribute
//! generates a hidden type with the function's name (types and functions live in separate
//! namespaces) that `handlers!` names. Automatic registration works at link time (the
//! `inventory` crate): handlers in a library crate that the binary never refers to are not
//! linked, so not collected; refer to that library from the binary (`use my_handlers as _;`)
//! or list the handlers with `kopf::handlers!` (see `Registry::collected`).

use proc_macro::TokenStream;

mod expand;
mod kinds;
mod parse;
mod test_attr;
mod validate;

use kinds::Kind;

/// Run for objects found when the operator starts that it handled before (Kopf's
/// `@kopf.on.resume`). Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`,
/// `labels(..)`, `annotations(..)`, `when`, `field`, `value`, `deleted`, `crate`; see the
/// [crate docs](crate) for the syntax and the arguments.
#[proc_macro_attribute]
pub fn on_resume(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Resume, args, item)
}

/// Run for objects created since the operator last handled them (Kopf's `@kopf.on.create`).
/// Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`, `labels(..)`,
/// `annotations(..)`, `when`, `field`, `value`, `crate`.
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
/// never retried. Options: `id`, `param`, `labels(..)`, `annotations(..)`, `when`, `crate`.
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
/// `backoff`, `param`, `labels(..)`, `annotations(..)`, `when`, `crate`. Arguments: the
/// resource arguments, `logger`, `retry`, `started`, `runtime`, `param`, `resource`, `memo`.
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
/// `crate`. Arguments: the resource arguments, `patch`, `logger`, `retry`, `started`,
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
/// `retries`, `backoff`, `param`, `labels(..)`, `annotations(..)`, `when`, `crate`. Arguments:
/// as `daemon`.
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
/// `retries`, `backoff`, `param`, `crate`; see [activity handlers](crate#activity-handlers).
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
/// `401 Unauthorized` (Kopf's `@kopf.on.login`). The function returns `kopf::ConnectionInfo`
/// or `kube::Config`, an `Option` of either (`None`: no credentials from this handler), or a
/// `kopf::Result` of those. Options: `id`, `errors`, `timeout`, `retries`, `backoff`, `param`,
/// `crate`; arguments: `logger`, `memo`, `param`, `retry`, `started`, `runtime`.
///
/// ```
/// #[kopf::on_login(retries = 3)]
/// async fn login_fn(logger: &kopf::Logger) -> kopf::Result<kopf::ConnectionInfo> {
///     let token = std::env::var("MY_TOKEN")?;
///     logger.info("logging in with MY_TOKEN");
///     Ok(kopf::ConnectionInfo::new("https://cluster.example:6443").token(token))
/// }
/// ```
#[proc_macro_attribute]
pub fn on_login(args: TokenStream, item: TokenStream) -> TokenStream {
    handler(Kind::Login, args, item)
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
    let function = match syn::parse::<syn::ItemFn>(item.clone()) {
        Ok(function) => function,
        Err(error) => {
            let mut output = TokenStream::from(error.to_compile_error());
            output.extend(item);
            return output;
        }
    };
    let args = proc_macro2::TokenStream::from(args);
    let krate = parse::crate_path(&args);
    let parsed = parse::attribute(args);
    let handler = validate::handler(kind, parsed, &function);
    expand::handler(handler, krate, function).into()
}
