//! Handler arguments by name, converted by type: what `#[kopf::on_*]` functions receive.
//!
//! The attribute macros turn each parameter of a handler function into one call here: the
//! parameter's name picks a marker type in [`args`], its type picks the conversion. A type
//! written as a reference (`&Value`, `Option<&str>`, `&mut Patch`) borrows from the invocation
//! through [`BorrowedArgument`]; any other type is produced by [`OwnedArgument`], which
//! deserializes the parts of the object that are JSON (`spec: MySpec`, `old: Option<i64>`).
//! A wrong type is a compile error at the parameter, explained by the traits'
//! `on_unimplemented` messages; a value that does not deserialize is a
//! [`PermanentError`] naming the argument and the type, never a panic.
//!
//! Invariants the generated code relies on:
//! 1. A handler names each argument once (Rust rejects a repeated parameter name), so the one
//!    `&mut Patch` of a [`Scope`] is taken at most once.
//! 2. The handler's own [`Patch`] lives in a [`PatchSlot`] for the length of the call and is
//!    merged into the invocation's patch when the slot is dropped: after the call, and also
//!    when the attempt is cancelled (timeout, shutdown) or panics, as with the shared patch of
//!    the plain API.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::actions::invocation::{HandlerResult, Invocation, Reason};
use crate::actions::live::Live;
use crate::clients::posting::{Events, Logger};
use crate::configs::settings::Settings;
use crate::structs::certificates::PeerCertificate;
use crate::structs::diff::Diff;
use crate::structs::errors::{Error, PermanentError, Result};
use crate::structs::memos::Memo;
use crate::structs::patch::Patch;
use crate::structs::resources::{Resource, Selector};
use crate::structs::reviews::{Operation, Warnings};

/// One marker type per argument name, so that a conversion is chosen by name and type.
#[allow(
    non_camel_case_types,
    reason = "compile errors print these as the argument names the user wrote"
)]
pub mod args {
    macro_rules! names {
        ($($name:ident),* $(,)?) => {$(
            #[doc = concat!("The `", stringify!($name), "` argument.")]
            #[derive(Debug)]
            pub enum $name {}
        )*};
    }
    names!(
        body,
        spec,
        meta,
        status,
        name,
        namespace,
        uid,
        labels,
        annotations,
        patch,
        logger,
        diff,
        old,
        new,
        reason,
        retry,
        started,
        runtime,
        param,
        resource,
        client,
        event,
        event_type,
        memo,
        events,
        stopped,
        subhandlers,
        activity,
        settings,
        dryrun,
        userinfo,
        headers,
        sslpeer,
        warnings,
        operation,
        subresource,
    );
}

/// What borrowed arguments borrow from: the invocation, and the handler's own patch.
#[derive(Debug)]
pub struct Scope<'a> {
    invocation: &'a Invocation,
    patch: Option<&'a mut Patch>,
    typed: &'a Typed,
}

/// The JSON parts of the object deserialized into the handler's own types for one call, so
/// that they can be lent (`body: &MyResource`): one slot per argument name, each filled once.
///
/// The slots are made when a handler first asks for such an argument: most ask for none, and
/// the empty slots in every call's future took three cache lines to make and to drop. The raw
/// watch event (`event`), made for the call, has the last slot.
#[derive(Debug, Default)]
pub(crate) struct Typed {
    slots: OnceLock<Box<[Slot; 7]>>,
}

/// The slot of the `event` argument.
const EVENT_SLOT: usize = 6;

/// A deserialized argument's place.
type Slot = OnceLock<Box<dyn Any + Send + Sync>>;

impl Typed {
    /// The slot of the argument numbered `index`.
    fn slot(&self, index: usize) -> &Slot {
        &self.slots.get_or_init(Box::default)[index]
    }
}

/// Holds the patch a handler fills through `patch: &mut Patch`, and merges it into the
/// invocation's patch when dropped.
#[derive(Debug)]
pub struct PatchSlot<'a> {
    invocation: &'a Invocation,
    patch: Patch,
    typed: Typed,
}

impl<'a> Scope<'a> {
    /// The invocation that the arguments come from.
    pub(crate) fn invocation(&self) -> &'a Invocation {
        self.invocation
    }
}

impl<'a> PatchSlot<'a> {
    /// An empty patch for one call of the handler.
    pub fn new(invocation: &'a Invocation) -> Self {
        PatchSlot {
            invocation,
            patch: Patch::default(),
            typed: Typed::default(),
        }
    }

    /// The scope that the call's borrowed arguments come from.
    pub fn scope(&mut self) -> Scope<'_> {
        Scope {
            invocation: self.invocation,
            patch: Some(&mut self.patch),
            typed: &self.typed,
        }
    }
}

impl Drop for PatchSlot<'_> {
    fn drop(&mut self) {
        // Taken only when filled: most calls patch nothing, and an empty patch taken is one
        // more to drop.
        if !self.patch.is_empty() {
            self.invocation
                .patch()
                .merge(std::mem::take(&mut self.patch));
        }
    }
}

/// An argument borrowed from the invocation: its type is written as a reference.
#[diagnostic::on_unimplemented(
    message = "this handler argument cannot be borrowed as `{Self}`",
    label = "not a type this argument is borrowed as",
    note = "borrowed forms: `&serde_json::Value` (or `&MyType` of a `DeserializeOwned` type) for body, spec, meta, status, labels, annotations, event; `&str` for name, uid; `Option<&str>` for namespace, event_type (`r#type`); `Option<&serde_json::Value>` for old, new, param; `&kopf::diff::Diff` for diff; `&mut kopf::Patch` for patch; `&kopf::Logger` or `&tracing::Span` for logger; `&kopf::Memo` for memo; `&kopf::Events` for events; `&kopf::resources::Resource` for resource; `&kube::Client` for client; `&tokio_util::sync::CancellationToken` for stopped; `&kopf::registry::SubHandlers` for subhandlers; `&kopf::Settings` for settings (login handlers); for admission handlers, `&serde_json::Value` for userinfo, `&BTreeMap<String, String>` for headers, `Option<&kopf::admission::PeerCertificate>` for sslpeer, `Option<&str>` for subresource, `&kopf::admission::Warnings` for warnings",
    note = "or take the argument by value: `spec: MySpec`, `old: Option<i64>`, `name: String`, `retry: u32`",
    note = "if `{Self}` is one of these types, your crate likely uses another version of kube, k8s-openapi or tokio-util than kopf does: use the same versions (the README's \"Use it in your crate\")"
)]
pub trait BorrowedArgument<'a, Name>: Sized {
    /// Borrows the argument.
    fn borrow(scope: &mut Scope<'a>) -> Result<Self>;
}

/// An argument converted from the invocation into a value of the handler's own.
#[diagnostic::on_unimplemented(
    message = "this handler argument cannot be converted into `{Self}`",
    label = "not a type this argument converts to",
    note = "owned forms: any `serde::de::DeserializeOwned` type for body, spec, meta, status, labels, annotations, old, new, param, event (`serde_json::Value`, a struct of yours, `Option<T>` when it may be absent); for daemons and timers, `kopf::Live<T>` for body, spec, meta, status, labels, annotations (a live view of the newest state); `String` for name, uid; `Option<String>` for namespace, event_type (`r#type`); `kopf::diff::Diff` for diff; `kopf::Reason` or `Option<kopf::Reason>` for reason; `u32`, `u64` or `usize` for retry; `time::OffsetDateTime` or `std::time::SystemTime` for started; `std::time::Duration` for runtime; `kopf::resources::Resource` for resource; `kube::Client` for client; `kopf::Logger` or `tracing::Span` for logger; `kopf::Memo` for memo (a handle to the same memo); `kopf::Events` for events; `tokio_util::sync::CancellationToken` or `kopf::Stopped` (with the reason) for stopped; `kopf::registry::SubHandlers` for subhandlers; `kopf::Settings` for settings and `kopf::activities::Activity` for activity (login handlers); for admission handlers, `bool` for dryrun, any `DeserializeOwned` type for userinfo, `BTreeMap<String, String>` for headers, `Option<kopf::admission::PeerCertificate>` or `serde_json::Value` (Kopf's form, `{{}}` when absent) for sslpeer, `kopf::admission::Warnings` for warnings, `kopf::admission::Operation` (or `String`, Kopf's form) for operation, `Option<String>` for subresource",
    note = "`patch` is only given as `&mut kopf::Patch`",
    note = "if `{Self}` is one of these types, your crate likely uses another version of kube, k8s-openapi or tokio-util than kopf does: use the same versions (the README's \"Use it in your crate\")"
)]
pub trait OwnedArgument<Name>: Sized {
    /// Produces the argument; a value that does not fit the type is a permanent error.
    fn extract(invocation: &Invocation) -> Result<Self>;
}

fn deserialize<T: DeserializeOwned>(argument: &str, value: &Value) -> Result<T> {
    T::deserialize(value).map_err(|error| {
        PermanentError::new(format!(
            "the `{argument}` argument does not fit {}: {error}",
            std::any::type_name::<T>()
        ))
        .into()
    })
}

const NULL: Value = Value::Null;

/// Labels and annotations: absent ones are an empty map, so `BTreeMap<String, String>` works.
fn map_or_empty<T: DeserializeOwned>(argument: &str, value: &Value) -> Result<T> {
    if value.is_null() {
        deserialize(argument, &Value::Object(Map::new()))
    } else {
        deserialize(argument, value)
    }
}

macro_rules! json_arguments {
    ($($name:ident => |$invocation:ident| $value:expr, via $convert:ident;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<'a> BorrowedArgument<'a, args::$name> for &'a Value {
            fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
                let $invocation = scope.invocation;
                Ok($value)
            }
        }

        impl<T: DeserializeOwned> OwnedArgument<args::$name> for T {
            fn extract($invocation: &Invocation) -> Result<Self> {
                $convert(stringify!($name), $value)
            }
        }
    )*};
}

json_arguments! {
    body => |invocation| invocation.body(), via deserialize;
    spec => |invocation| invocation.spec(), via deserialize;
    meta => |invocation| invocation.meta(), via deserialize;
    status => |invocation| invocation.status(), via deserialize;
    labels => |invocation| invocation.labels(), via map_or_empty;
    annotations => |invocation| invocation.annotations(), via map_or_empty;
    userinfo => |invocation| invocation.userinfo(), via deserialize;
}

/// A JSON part of the object lent as a type of the handler's own (`body: &MyResource`,
/// `spec: &MySpec`): deserialized once for the call. The attribute macros use it for those
/// names when the borrowed type is not `serde_json::Value`.
#[diagnostic::on_unimplemented(
    message = "this handler argument cannot be borrowed as `{Self}`",
    label = "the type must implement `serde::de::DeserializeOwned`",
    note = "or borrow it as it is, `&serde_json::Value`"
)]
pub trait BorrowedTyped<'a, Name>: Sized {
    /// Deserializes the argument for the call and lends it.
    fn borrow_typed(scope: &mut Scope<'a>) -> Result<Self>;
}

macro_rules! typed_json_arguments {
    ($($name:ident => $slot:literal, via $convert:ident;)*) => {$(
        impl<'a, T: DeserializeOwned + Send + Sync + 'static> BorrowedTyped<'a, args::$name>
            for &'a T
        {
            fn borrow_typed(scope: &mut Scope<'a>) -> Result<Self> {
                let slot = scope.typed.slot($slot);
                if slot.get().is_none() {
                    let value: T = $convert(stringify!($name), scope.invocation.$name())?;
                    let _ = slot.set(Box::new(value));
                }
                slot.get()
                    .and_then(|value| value.downcast_ref::<T>())
                    .ok_or_else(|| Error::msg(concat!("the `", stringify!($name), "` argument was asked for twice")))
            }
        }
    )*};
}

typed_json_arguments! {
    body => 0, via deserialize;
    spec => 1, via deserialize;
    meta => 2, via deserialize;
    status => 3, via deserialize;
    labels => 4, via map_or_empty;
    annotations => 5, via map_or_empty;
}

macro_rules! live_arguments {
    ($($name:ident),*) => {$(
        #[diagnostic::do_not_recommend]
        impl<T: DeserializeOwned> OwnedArgument<args::$name> for Live<T> {
            fn extract(invocation: &Invocation) -> Result<Self> {
                Live::$name(invocation)
            }
        }
    )*};
}

live_arguments!(body, spec, meta, status, labels, annotations);

/// The raw watch event, made for the call and lent as it is (`event: &serde_json::Value`).
#[diagnostic::do_not_recommend]
impl<'a> BorrowedArgument<'a, args::event> for &'a Value {
    fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
        let slot = scope.typed.slot(EVENT_SLOT);
        slot.get_or_init(|| Box::new(scope.invocation.event()))
            .downcast_ref::<Value>()
            .ok_or_else(|| Error::msg("the `event` argument was asked for twice"))
    }
}

/// The raw watch event deserialized into a type of the handler's own, and lent.
impl<'a, T: DeserializeOwned + Send + Sync + 'static> BorrowedTyped<'a, args::event> for &'a T {
    fn borrow_typed(scope: &mut Scope<'a>) -> Result<Self> {
        let slot = scope.typed.slot(EVENT_SLOT);
        if slot.get().is_none() {
            let value: T = deserialize("event", &scope.invocation.event())?;
            let _ = slot.set(Box::new(value));
        }
        slot.get()
            .and_then(|value| value.downcast_ref::<T>())
            .ok_or_else(|| Error::msg("the `event` argument was asked for twice"))
    }
}

/// The raw watch event, `{"type": ..., "object": ...}`, as a value of the handler's own.
impl<T: DeserializeOwned> OwnedArgument<args::event> for T {
    fn extract(invocation: &Invocation) -> Result<Self> {
        deserialize("event", &invocation.event())
    }
}

/// A login handler's settings, to read.
#[diagnostic::do_not_recommend]
impl<'a> BorrowedArgument<'a, args::settings> for &'a Settings {
    fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
        scope.invocation.settings.as_deref().ok_or_else(not_login)
    }
}

/// A copy of a login handler's settings.
#[diagnostic::do_not_recommend]
impl OwnedArgument<args::settings> for Settings {
    fn extract(invocation: &Invocation) -> Result<Self> {
        invocation
            .settings
            .as_deref()
            .cloned()
            .ok_or_else(not_login)
    }
}

/// The settings asked for by a resource handler (the attributes do not let this happen).
fn not_login() -> Error {
    PermanentError::new("the `settings` argument is only given to activity and login handlers")
        .into()
}

macro_rules! optional_json_arguments {
    ($($name:ident),*) => {$(
        #[diagnostic::do_not_recommend]
        impl<'a> BorrowedArgument<'a, args::$name> for Option<&'a Value> {
            fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
                Ok(scope.invocation.$name())
            }
        }

        impl<T: DeserializeOwned> OwnedArgument<args::$name> for T {
            fn extract(invocation: &Invocation) -> Result<Self> {
                deserialize(stringify!($name), invocation.$name().unwrap_or(&NULL))
            }
        }
    )*};
}

optional_json_arguments!(old, new, param);

macro_rules! borrowed {
    ($($name:ident: $type:ty => |$scope:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<'a> BorrowedArgument<'a, args::$name> for $type {
            fn borrow($scope: &mut Scope<'a>) -> Result<Self> {
                Ok($value)
            }
        }
    )*};
}

borrowed! {
    name: &'a str => |scope| scope.invocation.name();
    uid: &'a str => |scope| scope.invocation.uid();
    namespace: Option<&'a str> => |scope| scope.invocation.namespace();
    event_type: Option<&'a str> => |scope| scope.invocation.event_type();
    diff: &'a Diff => |scope| scope.invocation.diff();
    resource: &'a Resource => |scope| scope.invocation.resource();
    client: &'a kube::Client => |scope| scope.invocation.client();
    logger: &'a Logger => |scope| scope.invocation.logger();
    logger: &'a tracing::Span => |scope| scope.invocation.logger().span();
    memo: &'a Memo => |scope| scope.invocation.memo();
    events: &'a Events => |scope| scope.invocation.events();
    stopped: &'a tokio_util::sync::CancellationToken => |scope| scope.invocation.stopped();
    subhandlers: &'a crate::actions::invocation::SubHandlers => |scope| scope.invocation.subhandlers();
    headers: &'a BTreeMap<String, String> => |scope| scope.invocation.headers();
    sslpeer: Option<&'a PeerCertificate> => |scope| scope.invocation.sslpeer();
    subresource: Option<&'a str> => |scope| scope.invocation.subresource();
}

#[diagnostic::do_not_recommend]
impl<'a> BorrowedArgument<'a, args::warnings> for &'a Warnings {
    fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
        match &scope.invocation.review {
            Some(review) => Ok(&review.warnings),
            None => Err(not_reviewed("warnings")),
        }
    }
}

/// An admission-only argument asked for by another kind of handler (the attributes do not
/// let this happen).
fn not_reviewed(argument: &str) -> Error {
    PermanentError::new(format!(
        "the `{argument}` argument is only given to admission handlers"
    ))
    .into()
}

#[diagnostic::do_not_recommend]
impl<'a> BorrowedArgument<'a, args::patch> for &'a mut Patch {
    fn borrow(scope: &mut Scope<'a>) -> Result<Self> {
        // Invariant 1: taken once per scope.
        scope
            .patch
            .take()
            .ok_or_else(|| Error::msg("the patch was given to two arguments"))
    }
}

macro_rules! owned {
    ($($name:ident: $type:ty => |$invocation:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl OwnedArgument<args::$name> for $type {
            fn extract($invocation: &Invocation) -> Result<Self> {
                Ok($value)
            }
        }
    )*};
}

owned! {
    name: String => |invocation| invocation.name().to_owned();
    uid: String => |invocation| invocation.uid().to_owned();
    namespace: Option<String> => |invocation| invocation.namespace().map(str::to_owned);
    event_type: Option<String> => |invocation| invocation.event_type().map(str::to_owned);
    diff: Diff => |invocation| invocation.diff().clone();
    reason: Option<Reason> => |invocation| invocation.reason();
    retry: u32 => |invocation| invocation.retry();
    retry: u64 => |invocation| invocation.retry().into();
    retry: usize => |invocation| invocation.retry() as usize;
    started: time::OffsetDateTime => |invocation| invocation.started();
    started: SystemTime => |invocation| invocation.started().into();
    runtime: Duration => |invocation| invocation.runtime();
    resource: Resource => |invocation| invocation.resource().clone();
    client: kube::Client => |invocation| invocation.client().clone();
    logger: Logger => |invocation| invocation.logger().clone();
    logger: tracing::Span => |invocation| invocation.logger().span().clone();
    memo: Memo => |invocation| invocation.memo().clone();
    events: Events => |invocation| invocation.events().clone();
    stopped: tokio_util::sync::CancellationToken => |invocation| invocation.stopped().clone();
    stopped: crate::aiokits::tasks::Stopped => |invocation| crate::aiokits::tasks::Stopped::new(invocation.node.clone());
    subhandlers: crate::actions::invocation::SubHandlers => |invocation| invocation.subhandlers().clone();
    dryrun: bool => |invocation| invocation.dryrun();
    headers: BTreeMap<String, String> => |invocation| invocation.headers().clone();
    sslpeer: Option<PeerCertificate> => |invocation| invocation.sslpeer().cloned();
    sslpeer: Value => |invocation| invocation.sslpeer().map_or_else(|| Value::Object(Map::new()), PeerCertificate::to_json);
    warnings: Warnings => |invocation| invocation.warnings();
    operation: Option<Operation> => |invocation| invocation.operation();
    operation: String => |invocation| invocation.operation().map(|o| o.as_str().to_owned()).unwrap_or_default();
    subresource: Option<String> => |invocation| invocation.subresource().map(str::to_owned);
}

#[diagnostic::do_not_recommend]
impl OwnedArgument<args::operation> for Operation {
    fn extract(invocation: &Invocation) -> Result<Self> {
        invocation
            .operation()
            .ok_or_else(|| not_reviewed("operation"))
    }
}

#[diagnostic::do_not_recommend]
impl OwnedArgument<args::reason> for Reason {
    fn extract(invocation: &Invocation) -> Result<Self> {
        invocation.reason().ok_or_else(|| {
            PermanentError::new("the `reason` argument is only given to change handlers").into()
        })
    }
}

/// What a handler returns that is not a `Result`: stored in `status.<handler-id>`.
#[diagnostic::on_unimplemented(
    message = "a handler cannot return `{Self}`",
    label = "its result is stored in `status.<handler-id>`: it must implement `serde::Serialize`",
    note = "`()` and `None` store nothing; return `kopf::Result<T>` to report errors"
)]
pub trait Output {
    /// The value to store, if any.
    fn into_handler_result(self) -> HandlerResult;
}

impl<T: serde::Serialize> Output for T {
    fn into_handler_result(self) -> HandlerResult {
        output(self)
    }
}

/// What a handler returns as a `Result` (a return type whose last path segment is `Result`).
#[diagnostic::on_unimplemented(
    message = "a handler cannot return `{Self}`",
    label = "a handler's `Result` is `std::result::Result<T, E>` (or an alias of it)",
    note = "its `Ok` value is stored in `status.<handler-id>` (`T: serde::Serialize`; `()` stores nothing), its error converts into `kopf::Error` (`E: std::error::Error + Send + Sync + 'static`, or `kopf::Error` itself)"
)]
pub trait ResultOutput {
    /// The value to store, or the error.
    fn into_handler_result(self) -> HandlerResult;
}

impl<T: serde::Serialize, E: Into<Error>> ResultOutput for std::result::Result<T, E> {
    fn into_handler_result(self) -> HandlerResult {
        result_output(self)
    }
}

/// A typed resource that selects a handler's resource: `#[kopf::on_create(KopfExample)]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a typed Kubernetes resource",
    label = "expected a `kube::Resource<DynamicType = ()>`, e.g. a `#[derive(CustomResource)]` type or a k8s-openapi type",
    note = "or name the resource with strings: `(\"kopf.dev\", \"v1\", \"kopfexamples\")` or `(\"kopfexamples\")`",
    note = "if `{Self}` does derive `CustomResource` or come from k8s-openapi, your crate likely uses another version of kube or k8s-openapi than kopf does: use the same versions (the README's \"Use it in your crate\")"
)]
pub trait TypedResource {
    /// The selector of the resource.
    fn selector() -> Selector;
}

#[diagnostic::do_not_recommend]
impl<K: kube::Resource<DynamicType = ()>> TypedResource for K {
    fn selector() -> Selector {
        Selector::of::<K>()
    }
}

/// A typed resource in `owns = [..]` or `reads = [..]`: the rule the `rbac` subcommand prints.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a typed Kubernetes resource, as `owns` and `reads` take",
    label = "expected a `kube::Resource<DynamicType = ()>`, e.g. a k8s-openapi type or a `#[derive(CustomResource)]` type",
    note = "for other resources or verbs: `Registry::rbac_rule(kopf::rbac::RbacRule::new(group, resources, verbs))`"
)]
pub trait RbacResource {
    /// The rule for `owns`: every verb but `deletecollection`.
    fn owned() -> crate::structs::rbac::RbacRule;
    /// The rule for `reads`: `get`, `list`, `watch`.
    fn read() -> crate::structs::rbac::RbacRule;
}

#[diagnostic::do_not_recommend]
impl<K> RbacResource for K
where
    K: kube::Resource<DynamicType = ()>,
    K::Scope: 'static,
{
    fn owned() -> crate::structs::rbac::RbacRule {
        crate::structs::rbac::RbacRule::owns::<K>()
    }

    fn read() -> crate::structs::rbac::RbacRule {
        crate::structs::rbac::RbacRule::reads::<K>()
    }
}

/// Stores a handler's return value: `null` (from `()` or `None`) stores nothing.
pub fn output<T: serde::Serialize>(value: T) -> HandlerResult {
    match serde_json::to_value(value) {
        Ok(Value::Null) => Ok(None),
        Ok(value) => Ok(Some(value)),
        Err(error) => Err(PermanentError::new(format!(
            "the handler's result does not serialize into JSON: {error}"
        ))
        .into()),
    }
}

/// Stores a handler's `Ok` value, or converts its error into a [`kopf::Error`](Error).
pub fn result_output<T: serde::Serialize, E: Into<Error>>(
    result: std::result::Result<T, E>,
) -> HandlerResult {
    match result {
        Ok(value) => output(value),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_calls_typed_slots_are_made_only_when_one_is_asked_for() {
        assert!(
            std::mem::size_of::<Typed>() <= 16,
            "no room for slots in every call"
        );
        let typed = Typed::default();
        assert!(typed.slots.get().is_none());
        let _ = typed.slot(3).set(Box::new(1_u8));
        assert!(typed.slot(0).get().is_none());
        let kept = typed
            .slot(3)
            .get()
            .and_then(|value| value.downcast_ref::<u8>());
        assert_eq!(kept, Some(&1));
    }

    #[test]
    fn outputs_store_nothing_for_null() {
        assert!(output(()).unwrap().is_none());
        assert!(output(None::<i32>).unwrap().is_none());
        assert_eq!(output(json!({"a": 1})).unwrap(), Some(json!({"a": 1})));
        let failed: std::result::Result<(), std::io::Error> = Err(std::io::Error::other("disk"));
        let error = result_output(failed).unwrap_err();
        assert!(!error.is_permanent());
        assert_eq!(error.to_string(), "disk");
    }

    #[test]
    fn a_value_that_does_not_fit_is_a_permanent_error_naming_the_argument() {
        let error = deserialize::<i64>("old", &json!("x")).unwrap_err();
        assert!(error.is_permanent());
        assert!(
            error
                .to_string()
                .starts_with("the `old` argument does not fit i64: "),
            "{error}"
        );
        let labels: std::collections::BTreeMap<String, String> =
            map_or_empty("labels", &Value::Null).unwrap();
        assert!(labels.is_empty());
    }
}
