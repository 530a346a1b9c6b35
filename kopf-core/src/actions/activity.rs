//! One call of an activity handler: the [`ActivityInvocation`] it receives, the sync adapter,
//! and the arguments of `#[kopf::on_startup]`, `#[kopf::on_cleanup]` and `#[kopf::on_probe]`
//! functions.
//!
//! Invariant: the startup handlers share one `Settings` behind a lock that is held only inside
//! [`ActivityInvocation::settings`]'s guard or while a [`SettingsSlot`] copies in and out,
//! never while a handler awaits.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::actions::extract::{OwnedArgument, args};
use crate::actions::invocation::{HandlerFuture, HandlerResult, Invocation};
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::clients::posting::Logger;
use crate::configs::settings::Settings;
use crate::structs::errors::{Error, PermanentError, Result};
use crate::structs::indexes::{Index, IndexKey, IndexValue, Indexes};
use crate::structs::memos::Memo;

/// Which activity a handler serves (Kopf's `activity` argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activity {
    /// Before anything is watched (`on_startup`).
    Startup,
    /// When the operator stops (`on_cleanup`).
    Cleanup,
    /// When the liveness endpoint is asked (`on_probe`).
    Probe,
    /// When the operator logs in to the cluster (`on_login`).
    Authentication,
}

impl Activity {
    /// `startup`, `cleanup`, `probe`, `authentication`: as Kopf names them.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Startup => "startup",
            Activity::Cleanup => "cleanup",
            Activity::Probe => "probe",
            Activity::Authentication => "authentication",
        }
    }
}

impl fmt::Display for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything an activity handler may ask for (Kopf's kwargs of activities).
#[derive(Clone)]
pub struct ActivityInvocation {
    pub(crate) activity: Activity,
    pub(crate) settings: Arc<Mutex<Settings>>,
    pub(crate) memo: Memo,
    pub(crate) logger: Logger,
    pub(crate) retry: u32,
    pub(crate) started: time::OffsetDateTime,
    pub(crate) param: Option<Value>,
    pub(crate) client: kube::Client,
    /// The operator's indexes, as they are when the handler runs.
    pub(crate) indexes: Indexes,
    /// The attempt's node of the cancellation tree: its token is `stopped`.
    pub(crate) node: Tasks,
}

impl ActivityInvocation {
    /// The activity being run.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// The operator's settings. A startup handler's changes are what the operator runs with;
    /// for other activities this is a copy, and changes have no effect. Do not hold the guard
    /// across an `.await`.
    pub fn settings(&self) -> MutexGuard<'_, Settings> {
        crate::helpers::sync::lock(&self.settings)
    }

    /// The operator's memo: what a startup handler puts here, every object's memo starts with
    /// (see [`Memo`]).
    pub fn memo(&self) -> &Memo {
        &self.memo
    }

    /// The handler's logger (a `tracing` span with the handler's id and the activity).
    pub fn logger(&self) -> &Logger {
        &self.logger
    }

    /// How many attempts failed before this one (0 on the first).
    pub fn retry(&self) -> u32 {
        self.retry
    }

    /// When the first attempt started.
    pub fn started(&self) -> time::OffsetDateTime {
        self.started
    }

    /// How long since the first attempt started.
    pub fn runtime(&self) -> Duration {
        let elapsed = time::OffsetDateTime::now_utc() - self.started;
        elapsed.try_into().unwrap_or_default()
    }

    /// The handler's `param`.
    pub fn param(&self) -> Option<&Value> {
        self.param.as_ref()
    }

    /// The operator's client, for API calls of the handler's own.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The operator's index `id` (see [`Invocation::index`](crate::Invocation::index)), as it
    /// is now, as Kopf gives indexes to activities: empty for startup handlers, which run
    /// before anything is watched; live for probes; as the operator leaves it for cleanup
    /// handlers. Attributed handlers take it as an argument named after its function.
    pub fn index<K: IndexKey, V: IndexValue>(&self, id: &str) -> Result<&Index<K, V>> {
        self.indexes.get(id)
    }

    /// Cancelled when the handler should stop: the operator is stopping, or the handler's
    /// timeout passed ([`stop_reason`](Self::stop_reason) tells which).
    pub fn stopped(&self) -> &CancellationToken {
        self.node.token()
    }

    /// Why [`stopped`](Self::stopped) was cancelled; `None` while it is not.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.node.stop_reason()
    }
}

impl fmt::Debug for ActivityInvocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActivityInvocation")
            .field("activity", &self.activity)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Turns a blocking function into an activity handler function, run on the operator's own
/// threads (as [`blocking`](crate::registry::blocking) does for resource handlers).
pub fn blocking_activity<F>(
    function: F,
) -> impl Fn(ActivityInvocation) -> HandlerFuture + Clone + Send + Sync + 'static
where
    F: Fn(ActivityInvocation) -> HandlerResult + Send + Sync + 'static,
{
    let function = Arc::new(function);
    move |invocation: ActivityInvocation| -> HandlerFuture {
        let function = function.clone();
        let node = invocation.node.clone();
        crate::actions::blocking::on_thread(node, move || function(invocation))
    }
}

// Arguments of `#[kopf::on_startup]`, `#[kopf::on_cleanup]` and `#[kopf::on_probe]`
// functions, by name and type (as `extract` does for resource handlers).

/// What borrowed arguments of an activity handler borrow from: the invocation, and the
/// handler's own copy of the settings.
#[doc(hidden)]
#[derive(Debug)]
pub struct ActivityScope<'a> {
    invocation: &'a ActivityInvocation,
    settings: Option<&'a mut Lent>,
}

impl<'a> ActivityScope<'a> {
    /// The invocation that the arguments come from.
    pub(crate) fn invocation(&self) -> &'a ActivityInvocation {
        self.invocation
    }
}

/// The copy of the settings lent to a handler for one call, and whether it was lent to be
/// changed.
#[derive(Debug, Default)]
struct Lent {
    settings: Option<Settings>,
    mutably: bool,
}

/// Holds the copy of the settings that a handler reads through `settings: &kopf::Settings`,
/// or that a startup handler changes through `settings: &mut kopf::Settings`; a changed copy
/// is put back when the slot is dropped (after the call, and also when the attempt is cancelled
/// or panics).
#[doc(hidden)]
#[derive(Debug)]
pub struct SettingsSlot<'a> {
    invocation: &'a ActivityInvocation,
    lent: Lent,
}

impl<'a> SettingsSlot<'a> {
    /// A slot for one call of the handler; the settings are copied only if asked for.
    pub fn new(invocation: &'a ActivityInvocation) -> Self {
        SettingsSlot {
            invocation,
            lent: Lent::default(),
        }
    }

    /// The scope that the call's borrowed arguments come from.
    pub fn scope(&mut self) -> ActivityScope<'_> {
        ActivityScope {
            invocation: self.invocation,
            settings: Some(&mut self.lent),
        }
    }
}

impl Drop for SettingsSlot<'_> {
    fn drop(&mut self) {
        if self.lent.mutably
            && let Some(settings) = self.lent.settings.take()
        {
            *self.invocation.settings() = settings;
        }
    }
}

/// An argument of an activity handler, borrowed from its invocation.
#[diagnostic::on_unimplemented(
    message = "this activity handler argument cannot be borrowed as `{Self}`",
    label = "not a type this argument is borrowed as",
    note = "borrowed forms: `&mut kopf::Settings` for settings (startup handlers; `&kopf::Settings` to read them); `&kopf::Memo` for memo; `&kopf::Logger` or `&tracing::Span` for logger; `Option<&serde_json::Value>` for param; `&kube::Client` for client",
    note = "or take the argument by value: `retry: u32`, `runtime: std::time::Duration`, `activity: kopf::activities::Activity`, `param: MyParam`",
    note = "if `{Self}` is one of these types, your crate likely uses another version of kube, k8s-openapi or tokio-util than kopf does: use the same versions (the README's \"Use it in your crate\")"
)]
pub trait BorrowedActivityArgument<'a, Name>: Sized {
    /// Borrows the argument.
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self>;
}

/// An argument of an activity handler, converted into a value of the handler's own.
#[diagnostic::on_unimplemented(
    message = "this activity handler argument cannot be converted into `{Self}`",
    label = "not a type this argument converts to",
    note = "owned forms: `kopf::activities::Activity` for activity; `kopf::Settings` for settings (a copy); `kopf::Memo` for memo (a handle to the same memo); `kopf::Logger` or `tracing::Span` for logger; `u32`, `u64` or `usize` for retry; `time::OffsetDateTime` or `std::time::SystemTime` for started; `std::time::Duration` for runtime; any `serde::de::DeserializeOwned` type for param; `kube::Client` for client",
    note = "if `{Self}` is one of these types, your crate likely uses another version of kube, k8s-openapi or tokio-util than kopf does: use the same versions (the README's \"Use it in your crate\")"
)]
pub trait OwnedActivityArgument<Name>: Sized {
    /// Produces the argument; a value that does not fit the type is a permanent error.
    fn extract(invocation: &ActivityInvocation) -> Result<Self>;
}

/// The copy of the settings for one call, made when first asked for.
fn lend<'a>(scope: &mut ActivityScope<'a>, mutably: bool) -> Result<&'a mut Settings> {
    let lent = scope
        .settings
        .take()
        .ok_or_else(|| Error::msg("the settings were given to two arguments"))?;
    let invocation = scope.invocation;
    lent.mutably = mutably;
    Ok(lent
        .settings
        .get_or_insert_with(|| invocation.settings().clone()))
}

#[diagnostic::do_not_recommend]
impl<'a> BorrowedActivityArgument<'a, args::settings> for &'a mut Settings {
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
        lend(scope, true)
    }
}

#[diagnostic::do_not_recommend]
impl<'a> BorrowedActivityArgument<'a, args::settings> for &'a Settings {
    fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
        lend(scope, false).map(|settings| &*settings)
    }
}

macro_rules! borrowed {
    ($($name:ident: $type:ty => |$invocation:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<'a> BorrowedActivityArgument<'a, args::$name> for $type {
            fn borrow(scope: &mut ActivityScope<'a>) -> Result<Self> {
                let $invocation = scope.invocation;
                Ok($value)
            }
        }
    )*};
}

borrowed! {
    memo: &'a Memo => |invocation| invocation.memo();
    logger: &'a Logger => |invocation| invocation.logger();
    logger: &'a tracing::Span => |invocation| invocation.logger().span();
    param: Option<&'a Value> => |invocation| invocation.param();
    client: &'a kube::Client => |invocation| invocation.client();
}

macro_rules! owned {
    ($($name:ident: $type:ty => |$invocation:ident| $value:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl OwnedActivityArgument<args::$name> for $type {
            fn extract($invocation: &ActivityInvocation) -> Result<Self> {
                Ok($value)
            }
        }
    )*};
}

owned! {
    activity: Activity => |invocation| invocation.activity();
    settings: Settings => |invocation| invocation.settings().clone();
    memo: Memo => |invocation| invocation.memo().clone();
    logger: Logger => |invocation| invocation.logger().clone();
    logger: tracing::Span => |invocation| invocation.logger().span().clone();
    retry: u32 => |invocation| invocation.retry();
    retry: u64 => |invocation| invocation.retry().into();
    retry: usize => |invocation| invocation.retry() as usize;
    started: time::OffsetDateTime => |invocation| invocation.started();
    started: SystemTime => |invocation| invocation.started().into();
    runtime: Duration => |invocation| invocation.runtime();
    client: kube::Client => |invocation| invocation.client().clone();
}

/// A login handler's activity: always [`Activity::Authentication`], as Kopf passes
/// `activity=Activity.AUTHENTICATION` to `@kopf.on.login` handlers.
#[diagnostic::do_not_recommend]
impl OwnedArgument<args::activity> for Activity {
    fn extract(invocation: &Invocation) -> Result<Self> {
        match invocation.settings {
            Some(_) => Ok(Activity::Authentication),
            None => Err(PermanentError::new(
                "the `activity` argument is only given to activity and login handlers",
            )
            .into()),
        }
    }
}

impl<T: DeserializeOwned> OwnedActivityArgument<args::param> for T {
    fn extract(invocation: &ActivityInvocation) -> Result<Self> {
        let param = invocation.param().unwrap_or(&Value::Null);
        T::deserialize(param).map_err(|error| {
            PermanentError::new(format!(
                "the `param` argument does not fit {}: {error}",
                std::any::type_name::<T>()
            ))
            .into()
        })
    }
}
