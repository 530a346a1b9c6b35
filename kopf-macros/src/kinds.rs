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
}

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
];

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
    "event_type",
    "param",
    "resource",
    "client",
    "memo",
    "events",
];

const COMMON_OPTIONS: &[&str] = &[
    "id",
    "category",
    "param",
    "labels",
    "annotations",
    "when",
    "crate",
];
const CHANGE_OPTIONS: &[&str] = &["errors", "timeout", "retries", "backoff", "field", "value"];

/// The attributes' names.
pub(crate) const ATTRIBUTES: &[&str] = &[
    "on_resume",
    "on_create",
    "on_update",
    "on_delete",
    "on_field",
    "on_event",
];

/// Options that take no value (`optional`, or `optional = true`).
pub(crate) const FLAGS: &[&str] = &["optional", "deleted"];

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
];

impl Kind {
    /// The attribute's name, as users write it.
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            Kind::Resume => "on_resume",
            Kind::Create => "on_create",
            Kind::Update => "on_update",
            Kind::Delete => "on_delete",
            Kind::Field => "on_field",
            Kind::Event => "on_event",
        }
    }

    /// The argument names a handler of this kind may ask for.
    pub(crate) fn arguments(self) -> &'static [&'static str] {
        match self {
            Kind::Event => EVENT_ARGUMENTS,
            _ => CHANGE_ARGUMENTS,
        }
    }

    /// Whether this kind accepts the option.
    pub(crate) fn accepts(self, option: &str) -> bool {
        COMMON_OPTIONS.contains(&option)
            || match self {
                Kind::Event => false,
                Kind::Resume => CHANGE_OPTIONS.contains(&option) || option == "deleted",
                Kind::Create => CHANGE_OPTIONS.contains(&option),
                Kind::Update | Kind::Field => {
                    CHANGE_OPTIONS.contains(&option) || option == "old" || option == "new"
                }
                Kind::Delete => CHANGE_OPTIONS.contains(&option) || option == "optional",
            }
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

/// Where an argument that this kind does not get is available, for error messages.
pub(crate) fn elsewhere(argument: &str) -> Option<&'static str> {
    Some(match argument {
        "event_type" => "only `on_event` handlers get it",
        "diff" | "old" | "new" | "reason" | "retry" | "started" | "runtime" => {
            "only change handlers get it: `on_resume`, `on_create`, `on_update`, `on_delete`, `on_field`"
        }
        "stopped" => "daemons and timers get it, and they are not supported yet",
        "settings" => "it is not supported yet",
        _ => return None,
    })
}

/// Which kinds have an option that this kind does not, for error messages.
pub(crate) fn option_elsewhere(option: &str) -> &'static str {
    match option {
        "optional" => " (only `on_delete` has it)",
        "deleted" => " (only `on_resume` has it)",
        "old" | "new" => " (only `on_update` and `on_field` have it)",
        "errors" | "timeout" | "retries" | "backoff" => {
            " (event handlers are never retried: their errors are logged)"
        }
        "field" | "value" => " (only change handlers have it)",
        _ => "",
    }
}
