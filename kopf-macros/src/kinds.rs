//! The handler kinds: their attribute names, the options and the arguments each accepts.

/// A kind of handler, one per attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Resume,
    Create,
    Update,
    Delete,
    Field,
    Event,
    Index,
    Daemon,
    Timer,
    Startup,
    Cleanup,
    Probe,
    Login,
    Validate,
    Mutate,
}

/// What login handlers get: they run before the operator has a client.
const LOGIN_ARGUMENTS: &[&str] = &[
    "activity", "settings", "logger", "memo", "param", "retry", "started", "runtime",
];

/// What startup handlers get: the operator's settings, which they may change, and what every
/// activity gets.
const STARTUP_ARGUMENTS: &[&str] = &[
    "activity", "settings", "logger", "memo", "retry", "started", "runtime", "param", "client",
];

/// What cleanup and probe handlers get: the settings only to read.
const ACTIVITY_ARGUMENTS: &[&str] = &[
    "activity", "settings", "logger", "memo", "retry", "started", "runtime", "param", "client",
];

/// The options of activity handlers: they serve no resource.
const ACTIVITY_OPTIONS: &[&str] = &[
    "id", "errors", "timeout", "retries", "backoff", "param", "owns", "reads", "crate",
];

const CHANGE_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "patch",
    "logger",
    "diff",
    "old",
    "new",
    "reason",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "client",
    "memo",
    "events",
    "subhandlers",
];

/// What event handlers get: the event, and Kopf's values of a first attempt (`retry` 0,
/// `started` now, `runtime` nearly 0), since they are called once per event.
const EVENT_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "patch",
    "logger",
    "event",
    "type",
    "event_type",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "client",
    "memo",
    "events",
];

const DAEMON_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "patch",
    "logger",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "client",
    "memo",
    "events",
    "stopped",
];

/// What index functions get: a `patch` too, as in Kopf, where it is never applied.
const INDEX_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "patch",
    "logger",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "memo",
];

/// What validating handlers get: the resource arguments, the change the request makes, and
/// what the review says (Kopf's webhook kwargs), and Kopf's values of a first attempt (`retry`
/// 0, `started` now, `runtime` nearly 0). No `patch`: only mutating handlers change the object.
const VALIDATE_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "logger",
    "diff",
    "old",
    "new",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "client",
    "memo",
    "dryrun",
    "userinfo",
    "headers",
    "sslpeer",
    "warnings",
    "operation",
    "subresource",
];

/// What mutating handlers get: as validating ones, and the patch.
const MUTATE_ARGUMENTS: &[&str] = &[
    "body",
    "spec",
    "meta",
    "status",
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "patch",
    "logger",
    "diff",
    "old",
    "new",
    "retry",
    "started",
    "runtime",
    "param",
    "resource",
    "client",
    "memo",
    "dryrun",
    "userinfo",
    "headers",
    "sslpeer",
    "warnings",
    "operation",
    "subresource",
];

/// The options of admission handlers besides the common ones; no `errors`, `timeout`,
/// `retries`, `backoff`: they run once per request.
const ADMISSION_OPTIONS: &[&str] = &[
    "field",
    "value",
    "operations",
    "operation",
    "subresource",
    "persistent",
    "side_effects",
    "ignore_failures",
];

const COMMON_OPTIONS: &[&str] = &[
    "id",
    "category",
    "param",
    "labels",
    "annotations",
    "when",
    "owns",
    "reads",
    "crate",
];
const CHANGE_OPTIONS: &[&str] = &["errors", "timeout", "retries", "backoff", "field", "value"];
/// Event handlers are never retried: only the field filter besides the common options.
const EVENT_OPTIONS: &[&str] = &["field", "value"];
const INDEX_OPTIONS: &[&str] = &["errors", "timeout", "retries", "backoff", "field", "value"];
const DAEMON_OPTIONS: &[&str] = &[
    "errors",
    "timeout",
    "retries",
    "backoff",
    "field",
    "value",
    "initial_delay",
    "cancellation_backoff",
    "cancellation_timeout",
];
const TIMER_OPTIONS: &[&str] = &[
    "errors",
    "timeout",
    "retries",
    "backoff",
    "field",
    "value",
    "initial_delay",
    "interval",
    "idle",
    "sharp",
];

/// Options that take no value (`optional`, or `optional = true`).
pub(crate) const FLAGS: &[&str] = &[
    "optional",
    "deleted",
    "sharp",
    "leader_only",
    "persistent",
    "side_effects",
    "ignore_failures",
];

/// Every option any kind accepts, to tell "unknown" from "not for this kind".
pub(crate) const ALL_OPTIONS: &[&str] = &[
    "id",
    "category",
    "param",
    "labels",
    "annotations",
    "when",
    "crate",
    "errors",
    "timeout",
    "retries",
    "backoff",
    "field",
    "value",
    "old",
    "new",
    "optional",
    "deleted",
    "initial_delay",
    "cancellation_backoff",
    "cancellation_timeout",
    "interval",
    "idle",
    "sharp",
    "leader_only",
    "owns",
    "reads",
    "operations",
    "operation",
    "subresource",
    "persistent",
    "side_effects",
    "ignore_failures",
];

impl Kind {
    /// The kind of an attribute's name, if it is one of the handler attributes.
    pub(crate) fn from_attribute(name: &str) -> Option<Kind> {
        Some(match name {
            "on_resume" => Kind::Resume,
            "on_create" => Kind::Create,
            "on_update" => Kind::Update,
            "on_delete" => Kind::Delete,
            "on_field" => Kind::Field,
            "on_event" => Kind::Event,
            "index" => Kind::Index,
            "daemon" => Kind::Daemon,
            "timer" => Kind::Timer,
            "on_startup" => Kind::Startup,
            "on_cleanup" => Kind::Cleanup,
            "on_probe" => Kind::Probe,
            "on_login" => Kind::Login,
            "on_validate" => Kind::Validate,
            "on_mutate" => Kind::Mutate,
            _ => return None,
        })
    }

    /// The attribute's name, as users write it.
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            Kind::Resume => "on_resume",
            Kind::Create => "on_create",
            Kind::Update => "on_update",
            Kind::Delete => "on_delete",
            Kind::Field => "on_field",
            Kind::Event => "on_event",
            Kind::Index => "index",
            Kind::Daemon => "daemon",
            Kind::Timer => "timer",
            Kind::Startup => "on_startup",
            Kind::Cleanup => "on_cleanup",
            Kind::Probe => "on_probe",
            Kind::Login => "on_login",
            Kind::Validate => "on_validate",
            Kind::Mutate => "on_mutate",
        }
    }

    /// The argument names a handler of this kind may ask for.
    pub(crate) fn arguments(self) -> &'static [&'static str] {
        match self {
            Kind::Event => EVENT_ARGUMENTS,
            Kind::Startup => STARTUP_ARGUMENTS,
            Kind::Cleanup | Kind::Probe => ACTIVITY_ARGUMENTS,
            Kind::Login => LOGIN_ARGUMENTS,
            Kind::Index => INDEX_ARGUMENTS,
            Kind::Daemon | Kind::Timer => DAEMON_ARGUMENTS,
            Kind::Validate => VALIDATE_ARGUMENTS,
            Kind::Mutate => MUTATE_ARGUMENTS,
            _ => CHANGE_ARGUMENTS,
        }
    }

    /// Whether this kind accepts the option.
    pub(crate) fn accepts(self, option: &str) -> bool {
        if !self.serves_resource() {
            let rbac = matches!(option, "owns" | "reads");
            return (ACTIVITY_OPTIONS.contains(&option) && !(rbac && self == Kind::Login))
                || (option == "leader_only" && matches!(self, Kind::Startup | Kind::Cleanup));
        }
        COMMON_OPTIONS.contains(&option)
            || match self {
                Kind::Event => EVENT_OPTIONS.contains(&option),
                Kind::Resume => CHANGE_OPTIONS.contains(&option) || option == "deleted",
                Kind::Create => CHANGE_OPTIONS.contains(&option),
                Kind::Update | Kind::Field => {
                    CHANGE_OPTIONS.contains(&option) || option == "old" || option == "new"
                }
                Kind::Delete => CHANGE_OPTIONS.contains(&option) || option == "optional",
                Kind::Index => INDEX_OPTIONS.contains(&option),
                Kind::Daemon => DAEMON_OPTIONS.contains(&option),
                Kind::Timer => TIMER_OPTIONS.contains(&option),
                Kind::Validate | Kind::Mutate => ADMISSION_OPTIONS.contains(&option),
                Kind::Startup | Kind::Cleanup | Kind::Probe | Kind::Login => false,
            }
    }

    /// Whether this kind serves the operator itself (`on_startup`, `on_cleanup`, `on_probe`):
    /// it takes no resource, and its invocation is an activity's.
    pub(crate) fn is_activity(self) -> bool {
        matches!(self, Kind::Startup | Kind::Cleanup | Kind::Probe)
    }

    /// Whether this kind serves a resource: all but activities and `on_login` (which gets
    /// the invocation of resource handlers, without an object).
    pub(crate) fn serves_resource(self) -> bool {
        !self.is_activity() && self != Kind::Login
    }

    /// The options this kind accepts, for error messages.
    pub(crate) fn options(self) -> Vec<&'static str> {
        ALL_OPTIONS
            .iter()
            .copied()
            .filter(|option| self.accepts(option))
            .collect()
    }
}

/// Whether some kind of handler gets this argument: any other parameter name takes the index
/// of the `#[kopf::index]` function of that name.
pub(crate) fn is_argument(name: &str) -> bool {
    [
        CHANGE_ARGUMENTS,
        MUTATE_ARGUMENTS,
        EVENT_ARGUMENTS,
        INDEX_ARGUMENTS,
        DAEMON_ARGUMENTS,
        STARTUP_ARGUMENTS,
    ]
    .iter()
    .any(|arguments| arguments.contains(&name))
        || elsewhere(name).is_some()
}

/// The marker type (in `__private::args`) of an argument's name: `type`, Kopf's name of an event
/// handler's `event_type`, is a keyword in Rust (written `r#type`) and no marker's name.
pub(crate) fn marker(argument: &str) -> &str {
    match argument {
        "type" => "event_type",
        other => other,
    }
}

/// Why this kind does not get an argument that others do, for error messages.
pub(crate) fn not_given(kind: Kind, argument: &str) -> Option<&'static str> {
    match (kind, argument) {
        (Kind::Validate, "patch") => Some(
            "a validating handler cannot change the object: use `#[kopf::on_mutate]` to patch it",
        ),
        _ => elsewhere(argument),
    }
}

/// Where an argument that this kind does not get is available, for error messages.
pub(crate) fn elsewhere(argument: &str) -> Option<&'static str> {
    Some(match argument {
        "event" | "type" | "event_type" => "only `on_event` handlers get it",
        "reason" | "subhandlers" => {
            "only change handlers get it: `on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`"
        }
        "diff" | "old" | "new" => {
            "only change handlers and admission handlers get it: `on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`, `on_validate`, `on_mutate`"
        }
        "dryrun" | "userinfo" | "headers" | "sslpeer" | "warnings" | "operation"
        | "subresource" => "only admission handlers get it: `on_validate`, `on_mutate`",
        "stopped" => "only daemons and timers get it: `daemon`, `timer`",
        "settings" => {
            "only activity and login handlers get it: `on_startup`, `on_cleanup`, `on_probe`, `on_login`"
        }
        "activity" => {
            "only activity and login handlers get it: `on_startup`, `on_cleanup`, `on_probe`, `on_login`"
        }
        _ => return None,
    })
}

/// Which kinds have an option that this kind does not, for error messages.
pub(crate) fn option_elsewhere(kind: Kind, option: &str) -> &'static str {
    let admission = matches!(kind, Kind::Validate | Kind::Mutate);
    match option {
        "errors" | "timeout" | "retries" | "backoff" if admission => {
            " (admission handlers run once per request and are never retried: any error denies \
             the request, and the API server's webhook timeout limits the call)"
        }
        "operations" | "operation" | "subresource" | "persistent" | "side_effects"
        | "ignore_failures" => " (only admission handlers have it: `on_validate`, `on_mutate`)",
        "optional" => " (only `on_delete` has it)",
        "deleted" => " (only `on_resume` has it)",
        "old" | "new" => " (only `on_update` and `on_field` have it)",
        "errors" | "timeout" | "retries" | "backoff" => {
            " (event handlers are never retried: their errors are logged)"
        }
        "initial_delay" => " (only `daemon` and `timer` have it)",
        "cancellation_backoff" | "cancellation_timeout" => " (only `daemon` has it)",
        "interval" | "idle" | "sharp" => " (only `timer` has it)",
        "leader_only" => " (only `on_startup` and `on_cleanup` have it)",
        "owns" | "reads" => {
            " (a login handler makes the credentials: declare what it reads with `Registry::rbac_rule`)"
        }
        "category" | "labels" | "annotations" | "when" | "field" | "value" => {
            " (only handlers of resources have it; activity handlers serve the operator itself)"
        }
        _ => "",
    }
}
