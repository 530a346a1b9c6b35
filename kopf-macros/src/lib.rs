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
//! | `errors = "temporary"` \| `"permanent"` \| `"ignored"` | change | what an arbitrary error does |
//! | `timeout = "10s"`, `backoff = 1.5` | change | durations: seconds as numbers, or strings with `ms`, `s`, `m`, `h` (`"1m30s"`), or any `Duration` expression |
//! | `retries = 3` | change | give up after this many attempts |
//! | `param = {"any": "json"}` | all | the `param` argument, written as in `serde_json::json!` |
//! | `labels("app" = "web", tier = present, "legacy" = absent, "x" = \|v\| ...)` | all | label filters: a value, `present`, `absent`, or a `Fn(Option<&str>) -> bool` |
//! | `annotations(...)` | all | the same for annotations |
//! | `when = path::to::predicate` | all | a `Fn(&kopf::Invocation) -> bool` |
//! | `field = "spec.x"` | change (required by `on_field`) | narrows the handler to the field |
//! | `value = ...`, `old = ...`, `new = ...` | change; `old`/`new` on `on_update`, `on_field` | field filters: JSON (`1`, `"x"`, `{"a": 1}`, `null`), `present`, `absent`, or a `Fn(Option<&Value>) -> bool`; they need `field` |
//! | `optional` | `on_delete` | do not block deletion with a finalizer |
//! | `deleted` | `on_resume` | also resume objects being deleted |
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
//! | `body`, `spec`, `meta`, `status`, `labels`, `annotations` | `&serde_json::Value` | any `DeserializeOwned` type (`MySpec`, `Option<MyStatus>`, `BTreeMap<String, String>`; absent labels are empty) |
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
//!
//! Change handlers (`on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`) get all
//! but `event_type`; `on_event` handlers get all but `diff`, `old`, `new`, `reason`, `retry`,
//! `started`, `runtime`. A name the kind does not get, or a type the name does not convert
//! to, is a compile error at that parameter.
//!
//! ## Results
//!
//! Chosen by the return type as written: none stores nothing; a type whose last path segment
//! is `Result` (`kopf::Result<T>`, `std::io::Result<T>`, `Result<T, MyError>`) must be
//! `std::result::Result<T, E>` or an alias of it, with `T: Serialize` and `E: Into<kopf::Error>`
//! (any `std::error::Error + Send + Sync + 'static`); any other type must be `Serialize`.
//! A value is stored at `status.<handler-id>`; `()` and `None` store nothing.
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
