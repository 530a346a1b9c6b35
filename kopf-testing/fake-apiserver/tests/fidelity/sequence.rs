//! What a sequence is: named steps (requests, polls, watches) that the suite sends to both
//! servers in the same order, each step's answers compared.
//!
//! Paths, headers and bodies are templates: `{{ns}}` is the sequence's own namespace, `{{u}}`
//! the same word for the names of cluster-scoped objects, and `{{step.rv}}` (`.uid`, `.name`,
//! `.continue`, `.token`, or any JSON pointer: `{{step:/spec/x}}`) a value from an earlier
//! step's answer on the same server, so that each server is sent its own resourceVersions,
//! uids and generated names. Recorded sequences use lookups of what the replay has seen on
//! the server instead: `{{@rv}}` and `{{@uid}}` of the request's object, `{{@uid:PATH}}` of
//! another, `{{@list-rv}}` and `{{@continue}}` of the request's collection.

use std::time::Duration;

use serde_json::Value;

/// A named series of steps, run on both servers in lockstep.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    /// `topic/what`: the name the table of kept differences refers to.
    pub(crate) name: String,
    pub(crate) steps: Vec<Step>,
    /// Runs alone, after the others: it forgets the fake server's history, which every
    /// watch running at the same time would notice.
    pub(crate) exclusive: bool,
    /// Namespaces (templates) made before the steps, beside the sequence's own.
    pub(crate) namespaces: Vec<String>,
}

/// One step of a sequence.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// One request; its answer is compared.
    Send { label: String, call: Call },
    /// A request repeated until its answer meets the condition (the real server's
    /// controllers work in the background; the fake server's at once); the last answer and
    /// whether the condition was met are compared.
    Poll {
        label: String,
        call: Call,
        until: Condition,
        /// How long it may take.
        patience: Duration,
    },
    /// A watch opened, read until `until`, closed; its events are compared.
    Watch {
        label: String,
        call: Call,
        until: Until,
    },
    /// A watch opened and left open; later steps write, and `Read` compares its events.
    Open { label: String, call: Call },
    /// Reads the events of an open watch until `until`, compares them, and closes it.
    Read { label: String, until: Until },
    /// Waits, not compared, until a CustomResourceDefinition (a template of its name) is
    /// established and its resource served.
    Established { crd: String },
    /// The admission reviews the suite's webhook received so far at a path (a template, after
    /// `{{webhook}}`), in the order received; compared.
    Reviews { label: String, path: String },
    /// Forgets the fake server's watch history (the real server's history of a resource
    /// created after the versions asked for is already too short): the next watch from an
    /// older version gets `410 Gone` from both.
    Forget,
}

impl Step {
    pub(crate) fn label(&self) -> &str {
        match self {
            Step::Send { label, .. }
            | Step::Poll { label, .. }
            | Step::Watch { label, .. }
            | Step::Open { label, .. }
            | Step::Read { label, .. }
            | Step::Reviews { label, .. } => label,
            Step::Established { .. } => "established",
            Step::Forget => "forget",
        }
    }
}

/// Who sends a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Who {
    /// The cluster's admin (`system:masters`).
    Admin,
    /// No credentials at all.
    Anonymous,
    /// A bearer token (a template, such as `{{token.token}}`).
    Token(String),
}

/// A request: method, path with its query, headers, body, and who sends it.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: http::Method,
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Option<Payload>,
    pub(crate) who: Who,
}

/// A request's body.
#[derive(Debug, Clone)]
pub(crate) enum Payload {
    /// JSON, with templates in its strings.
    Json { content_type: String, value: Value },
    /// Text as it is (YAML for an apply, a malformed body), with templates.
    Text { content_type: String, text: String },
}

/// When a poll stops.
#[derive(Debug, Clone)]
pub(crate) enum Condition {
    /// The answer has this status code.
    Code(u16),
    /// The answer's body has this value at this JSON pointer.
    Equals(String, Value),
    /// The answer's body has nothing at this JSON pointer.
    Absent(String),
}

/// How long a watch is read.
#[derive(Debug, Clone)]
pub(crate) enum Until {
    /// This many events (periodic bookmarks not counted).
    Events(usize),
    /// The bookmark that ends the initial events (`k8s.io/initial-events-end`).
    InitialEventsEnd,
    /// The server ends the stream (a `timeoutSeconds`, or after an ERROR event).
    Closed,
    /// No event for this long (on the real server: after as many events as the fake sent).
    Quiet(Duration),
}

impl Sequence {
    pub(crate) fn new(name: &str) -> Sequence {
        Sequence {
            name: name.to_string(),
            steps: Vec::new(),
            exclusive: false,
            namespaces: Vec::new(),
        }
    }

    /// One more namespace (a template) to make before the steps.
    pub(crate) fn namespace(mut self, ns: &str) -> Sequence {
        self.namespaces.push(ns.to_string());
        self
    }

    fn push(mut self, step: Step) -> Sequence {
        let label = step.label();
        let labelled = !matches!(
            step,
            Step::Established { .. } | Step::Forget | Step::Read { .. }
        );
        assert!(
            !labelled || !self.steps.iter().any(|s| s.label() == label),
            "{}: two steps are labelled {label}",
            self.name
        );
        self.steps.push(step);
        self
    }

    /// One request, compared.
    pub(crate) fn send(self, label: &str, call: Call) -> Sequence {
        self.push(Step::Send {
            label: label.into(),
            call,
        })
    }

    /// A request repeated until `until` holds (or a minute passes), compared.
    pub(crate) fn poll(self, label: &str, call: Call, until: Condition) -> Sequence {
        self.poll_for(label, call, until, Duration::from_secs(60))
    }

    /// A request repeated until `until` holds or `patience` runs out, compared.
    pub(crate) fn poll_for(
        self,
        label: &str,
        call: Call,
        until: Condition,
        patience: Duration,
    ) -> Sequence {
        self.push(Step::Poll {
            label: label.into(),
            call,
            until,
            patience,
        })
    }

    /// A watch, read until `until`, compared.
    pub(crate) fn watch(self, label: &str, call: Call, until: Until) -> Sequence {
        self.push(Step::Watch {
            label: label.into(),
            call,
            until,
        })
    }

    /// A watch left open for a later [`Sequence::read`].
    pub(crate) fn open(self, label: &str, call: Call) -> Sequence {
        self.push(Step::Open {
            label: label.into(),
            call,
        })
    }

    /// Reads an open watch until `until`, compares its events, and closes it.
    pub(crate) fn read(self, label: &str, until: Until) -> Sequence {
        self.push(Step::Read {
            label: label.into(),
            until,
        })
    }

    /// Waits until the CustomResourceDefinition `crd` serves its resource.
    pub(crate) fn established(self, crd: &str) -> Sequence {
        self.push(Step::Established { crd: crd.into() })
    }

    /// Compares the reviews the suite's webhook received at `path` (after `{{webhook}}`).
    pub(crate) fn reviews(self, label: &str, path: &str) -> Sequence {
        self.push(Step::Reviews {
            label: label.into(),
            path: path.into(),
        })
    }

    /// Forgets the fake server's history; makes the sequence run alone.
    pub(crate) fn forget(mut self) -> Sequence {
        self.exclusive = true;
        self.push(Step::Forget)
    }
}

/// A query parameter's value, percent-encoded.
pub(crate) fn enc(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A request with this method and path (a template).
pub(crate) fn call(method: &str, path: &str) -> Call {
    Call {
        method: method.parse().expect("a valid method"),
        path: path.to_string(),
        headers: Vec::new(),
        body: None,
        who: Who::Admin,
    }
}

pub(crate) fn get(path: &str) -> Call {
    call("GET", path)
}

pub(crate) fn delete(path: &str) -> Call {
    call("DELETE", path)
}

pub(crate) fn post(path: &str, body: Value) -> Call {
    call("POST", path).json(body)
}

pub(crate) fn put(path: &str, body: Value) -> Call {
    call("PUT", path).json(body)
}

/// A PATCH with this content type (`application/merge-patch+json`, ...).
pub(crate) fn patch(path: &str, content_type: &str, body: Value) -> Call {
    call("PATCH", path).json_as(content_type, body)
}

impl Call {
    /// A JSON body.
    pub(crate) fn json(self, value: Value) -> Call {
        self.json_as("application/json", value)
    }

    pub(crate) fn json_as(mut self, content_type: &str, value: Value) -> Call {
        self.body = Some(Payload::Json {
            content_type: content_type.into(),
            value,
        });
        self
    }

    /// A body sent as it is.
    pub(crate) fn text(mut self, content_type: &str, text: &str) -> Call {
        self.body = Some(Payload::Text {
            content_type: content_type.into(),
            text: text.into(),
        });
        self
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Call {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub(crate) fn who(mut self, who: Who) -> Call {
        self.who = who;
        self
    }

    /// Sent with the bearer token that an earlier TokenRequest step (its label) got.
    pub(crate) fn with_token_of(self, step: &str) -> Call {
        self.who(Who::Token(format!("{{{{{step}.token}}}}")))
    }
}
