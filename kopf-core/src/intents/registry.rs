//! The registry: the handlers an operator runs, grouped by the resources they serve.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::intents::activities::ActivityHandler;
use crate::intents::admission::AdmissionHandler;
use crate::intents::daemons::Background;
use crate::intents::daemons::DaemonHandler;
use crate::intents::daemons::TimerHandler;
use crate::intents::handlers::ChangeHandler;
use crate::intents::handlers::EventHandler;
use crate::intents::indexing::IndexHandler;
use crate::intents::login::LoginHandler;
use crate::structs::rbac::{RbacNeeds, RbacRule};
use crate::structs::resources::Selector;

/// The handlers of an operator. Tests and embedders build one explicitly, so each operator
/// runs exactly the handlers it names.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) changes: Vec<ChangeHandler>,
    pub(crate) events: Vec<EventHandler>,
    /// Daemons and timers.
    pub(crate) background: Vec<Background>,
    /// Startup, cleanup and probe handlers, in registration order.
    pub(crate) activities: Vec<ActivityHandler>,
    /// Index functions.
    pub(crate) indexes: Vec<IndexHandler>,
    /// Login handlers, in registration order.
    pub(crate) logins: Vec<LoginHandler>,
    /// Validating and mutating admission handlers, in registration order.
    pub(crate) admissions: Vec<AdmissionHandler>,
    /// The CRDs that the `crd` subcommand prints, in declaration order.
    pub(crate) crds: Vec<CustomResourceDefinition>,
    /// RBAC rules declared for the whole operator, for the `rbac` subcommand.
    pub(crate) rbac: Vec<RbacRule>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a handler.
    pub fn with(mut self, handler: impl Into<AnyHandler>) -> Self {
        self.add(handler);
        self
    }

    /// Adds a handler.
    pub fn add(&mut self, handler: impl Into<AnyHandler>) {
        match handler.into() {
            AnyHandler::Change(handler) => self.changes.push(handler),
            AnyHandler::Event(handler) => self.events.push(handler),
            AnyHandler::Index(handler) => self.indexes.push(handler),
            AnyHandler::Activity(handler) => self.activities.push(handler),
            AnyHandler::Login(handler) => self.logins.push(handler),
            AnyHandler::Daemon(handler) => self.background.push(Background::Daemon(handler)),
            AnyHandler::Timer(handler) => self.background.push(Background::Timer(handler)),
            AnyHandler::Admission(handler) => self.admissions.push(handler),
        }
    }

    /// Declares the CRD of a typed custom resource (e.g. a `#[derive(kube::CustomResource)]`
    /// type), for the operator binary's `crd` subcommand to print.
    ///
    /// A handler's attribute cannot tell whether its typed resource is a custom resource (Rust
    /// has no specialization to ask "does this type implement `CustomResourceExt`?"), so the
    /// CRDs are declared here, through the resource type's `kube::CustomResourceExt`:
    ///
    /// ```no_run
    /// # use serde::{Deserialize, Serialize};
    /// #[derive(kube::CustomResource, Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
    /// #[kube(group = "kopf.dev", version = "v1", kind = "KopfExample", namespaced)]
    /// struct KopfExampleSpec {
    ///     field: String,
    /// }
    ///
    /// # async fn main_() -> std::process::ExitCode {
    /// kopf::run_with(kopf::registry::Registry::collected().crd::<KopfExample>()).await
    /// # }
    /// ```
    ///
    /// Declaring a CRD does not serve it: handlers name their resources themselves.
    pub fn crd<K: kube::CustomResourceExt>(mut self) -> Self {
        self.add_crd::<K>();
        self
    }

    /// Declares the CRD of a typed custom resource; see [`Registry::crd`].
    pub fn add_crd<K: kube::CustomResourceExt>(&mut self) {
        let crd = K::crd();
        if !self
            .crds
            .iter()
            .any(|c| c.metadata.name == crd.metadata.name)
        {
            self.crds.push(crd);
        }
    }

    /// Declares an RBAC rule the operator needs beyond what the framework does and what its
    /// handlers declare (`owns = [..]`, `reads = [..]`): the `rbac` subcommand prints it.
    ///
    /// ```
    /// use kopf::rbac::RbacRule;
    /// use kopf::registry::Registry;
    ///
    /// let registry = Registry::collected()
    ///     .rbac_rule(RbacRule::new("", ["secrets"], ["get"]).names(["credentials"]));
    /// ```
    pub fn rbac_rule(mut self, rule: RbacRule) -> Self {
        self.add_rbac_rule(rule);
        self
    }

    /// Declares an RBAC rule; see [`Registry::rbac_rule`].
    pub fn add_rbac_rule(&mut self, rule: RbacRule) {
        if !self.rbac.contains(&rule) {
            self.rbac.push(rule);
        }
    }

    /// What each handler declares it touches, by handler id, in registration order.
    pub(crate) fn rbac_needs(&self) -> Vec<(&str, &RbacNeeds)> {
        self.changes
            .iter()
            .map(|h| (h.id.as_str(), &h.options.rbac))
            .chain(self.events.iter().map(|h| (h.id.as_str(), &h.options.rbac)))
            .chain(
                self.indexes
                    .iter()
                    .map(|h| (h.id.as_str(), &h.options.rbac)),
            )
            .chain(self.background.iter().map(|h| (h.id(), &h.options().rbac)))
            .chain(
                self.activities
                    .iter()
                    .map(|h| (h.id.as_str(), &h.options.rbac)),
            )
            .chain(
                self.admissions
                    .iter()
                    .map(|h| (h.id.as_str(), &h.options.rbac)),
            )
            .collect()
    }

    /// Every resource selector that some handler uses, each once, in registration order.
    pub(crate) fn selectors(&self) -> Vec<Selector> {
        let mut selectors: Vec<Selector> = Vec::new();
        let all = self
            .changes
            .iter()
            .map(|h| &h.selector)
            .chain(self.events.iter().map(|h| &h.selector))
            .chain(self.indexes.iter().map(|h| &h.selector))
            .chain(self.background.iter().map(Background::selector));
        for selector in all {
            if !selectors.contains(selector) {
                selectors.push(selector.clone());
            }
        }
        selectors
    }

    /// The change handlers of any of these selectors, in registration order.
    pub(crate) fn changes_for<'a>(
        &'a self,
        selectors: &'a [Selector],
    ) -> impl Iterator<Item = &'a ChangeHandler> {
        self.changes
            .iter()
            .filter(move |h| selectors.contains(&h.selector))
    }

    /// The daemons and timers of any of these selectors, in registration order.
    pub(crate) fn background_for<'a>(
        &'a self,
        selectors: &'a [Selector],
    ) -> impl Iterator<Item = &'a Background> {
        self.background
            .iter()
            .filter(move |h| selectors.contains(h.selector()))
    }

    /// The index functions of any of these selectors, in registration order.
    pub(crate) fn indexes_for<'a>(
        &'a self,
        selectors: &'a [Selector],
    ) -> impl Iterator<Item = &'a IndexHandler> {
        self.indexes
            .iter()
            .filter(move |h| selectors.contains(&h.selector))
    }

    /// The event handlers of any of these selectors, in registration order.
    pub(crate) fn events_for<'a>(
        &'a self,
        selectors: &'a [Selector],
    ) -> impl Iterator<Item = &'a EventHandler> {
        self.events
            .iter()
            .filter(move |h| selectors.contains(&h.selector))
    }
}

/// Any kind of handler, for [`Registry::with`].
#[derive(Debug)]
pub enum AnyHandler {
    /// A change handler.
    Change(ChangeHandler),
    /// An event handler.
    Event(EventHandler),
    /// An index function.
    Index(IndexHandler),
    /// A startup, cleanup or probe handler.
    Activity(ActivityHandler),
    /// A login handler.
    Login(LoginHandler),
    /// A daemon.
    Daemon(DaemonHandler),
    /// A timer.
    Timer(TimerHandler),
    /// A validating or mutating admission handler.
    Admission(AdmissionHandler),
}

impl From<AdmissionHandler> for AnyHandler {
    fn from(handler: AdmissionHandler) -> Self {
        AnyHandler::Admission(handler)
    }
}

impl From<DaemonHandler> for AnyHandler {
    fn from(handler: DaemonHandler) -> Self {
        AnyHandler::Daemon(handler)
    }
}

impl From<TimerHandler> for AnyHandler {
    fn from(handler: TimerHandler) -> Self {
        AnyHandler::Timer(handler)
    }
}

impl From<LoginHandler> for AnyHandler {
    fn from(handler: LoginHandler) -> Self {
        AnyHandler::Login(handler)
    }
}

impl From<ActivityHandler> for AnyHandler {
    fn from(handler: ActivityHandler) -> Self {
        AnyHandler::Activity(handler)
    }
}

impl From<ChangeHandler> for AnyHandler {
    fn from(handler: ChangeHandler) -> Self {
        AnyHandler::Change(handler)
    }
}

impl From<IndexHandler> for AnyHandler {
    fn from(handler: IndexHandler) -> Self {
        AnyHandler::Index(handler)
    }
}

impl From<EventHandler> for AnyHandler {
    fn from(handler: EventHandler) -> Self {
        AnyHandler::Event(handler)
    }
}

impl<H: Into<AnyHandler>> Extend<H> for Registry {
    /// Adds the handlers, in order.
    fn extend<I: IntoIterator<Item = H>>(&mut self, handlers: I) {
        for handler in handlers {
            self.add(handler);
        }
    }
}

/// A function annotated with `#[kopf::on_*]` that an attribute macro registered automatically:
/// the descriptor's constructor of its handlers and where the function is, to order the
/// handlers as the source does.
#[doc(hidden)]
#[derive(Debug)]
pub struct Collected {
    make: fn() -> Vec<AnyHandler>,
    module: &'static str,
    line: u32,
}

impl Collected {
    /// Used by the attribute macros through `inventory::submit!`.
    pub const fn new(make: fn() -> Vec<AnyHandler>, module: &'static str, line: u32) -> Self {
        Collected { make, module, line }
    }
}

inventory::collect!(Collected);

/// A function annotated with `#[kopf::on_*]`: the attribute generates a type of the same name
/// (types and functions live in different namespaces) implementing this trait, so that
/// [`handlers!`](crate::handlers) can name the function.
#[doc(hidden)]
pub trait Descriptor {
    /// The handlers that the function's attributes describe: one per attribute (several when
    /// stacked), in Kopf's order of registration (the attribute nearest the function first).
    fn handlers() -> Vec<AnyHandler>;
}

impl Registry {
    /// Every handler registered by `#[kopf::on_*]` attributes in the program, ordered by
    /// module path, then by line (so one module's handlers run in source order).
    ///
    /// Registration happens when the program is linked (through the `inventory` crate), so a
    /// handler is collected only if its crate is linked into the binary. Rust links a
    /// dependency only if the binary refers to it: a library of handlers that the binary
    /// never names is silently left out, even when it is listed in `Cargo.toml`. Refer to it
    /// from the binary: `use my_handlers as _;` is enough (checked on Linux with the default
    /// linker, in debug and release builds); calling a function of it is sure everywhere. Or
    /// build the registry explicitly with [`handlers!`](crate::handlers).
    pub fn collected() -> Self {
        let mut collected: Vec<&Collected> = inventory::iter::<Collected>.into_iter().collect();
        collected.sort_by_key(|c| (c.module, c.line));
        let mut registry = Registry::new();
        for handler in collected {
            registry.extend((handler.make)());
        }
        registry
    }
}

/// A handler as Kopf tells one registration from another: by its function and its id.
pub(crate) trait Registered {
    /// The handler's id.
    fn id(&self) -> &str;

    /// The path of the function behind the handler, as its attribute names it; `None` for
    /// a handler declared in code, whose id stands for its function.
    fn origin(&self) -> Option<&'static str>;

    /// Whether the two are one function registered twice under one id: stacked attributes.
    fn same_as(&self, other: &impl Registered) -> bool {
        self.id() == other.id() && self.origin() == other.origin()
    }
}

/// The handlers without the later registrations of one function under one id (Kopf's
/// `_deduplicated`): a function stacked as `on_resume` and `on_update` is called once for an
/// object that changed while the operator was down, which is both. Applied to the handlers
/// that a cause selected (filters passed), so that a registration whose filters do not pass
/// leaves the call to the other.
pub(crate) fn deduplicated<T, H: Registered>(items: Vec<T>, handler: impl Fn(&T) -> &H) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !kept.iter().any(|k| handler(k).same_as(handler(&item))) {
            kept.push(item);
        }
    }
    kept
}

macro_rules! registered {
    ($($handler:ty),*) => {$(
        impl Registered for $handler {
            fn id(&self) -> &str {
                &self.id
            }

            fn origin(&self) -> Option<&'static str> {
                self.options.origin
            }
        }
    )*};
}

registered!(
    ChangeHandler,
    EventHandler,
    IndexHandler,
    AdmissionHandler,
    ActivityHandler
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structs::resources::Selector;

    fn change(id: &str, origin: Option<&'static str>) -> ChangeHandler {
        let handler =
            ChangeHandler::on_update(Selector::named("kopfexamples"), id, |_| async { Ok(None) });
        match origin {
            Some(origin) => handler.origin(origin),
            None => handler,
        }
    }

    #[test]
    fn one_function_under_one_id_is_kept_once_and_first() {
        let handlers = [
            change("fn", Some("ops::fn")).errors(crate::actions::invocation::ErrorsMode::Ignored),
            change("fn", Some("ops::fn")),
            change("fn", Some("ops::other")),
            change("other", Some("ops::fn")),
            change("plain", None),
            change("plain", None),
        ];
        let kept = deduplicated(handlers.iter().collect(), |h| *h);
        let kept: Vec<(&str, Option<&str>)> = kept.iter().map(|h| (h.id(), h.origin())).collect();
        assert_eq!(
            kept,
            [
                ("fn", Some("ops::fn")),
                ("fn", Some("ops::other")),
                ("other", Some("ops::fn")),
                ("plain", None),
            ],
            "as Kopf: two functions under one id are two handlers; code-declared ones are their ids"
        );
        let first = deduplicated(handlers.iter().collect(), |h| *h)[0];
        assert_eq!(
            first.options.errors,
            crate::actions::invocation::ErrorsMode::Ignored
        );
    }
}
