//! What one run of a scenario produced, per object, made comparable: the handlers' calls, the
//! object's final state, the Kubernetes Events posted about it, and the log lines about it.
//! Times are blanked; what kopf-rs deliberately does differently is in [`ALLOWED`].

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// The deliberate differences from Kopf, by name, with their reasons; the suite blanks them
/// out before comparing (and the README's "Compatible with Python Kopf" lists them).
pub const ALLOWED: &[(&str, &str)] = &[
    (
        "touch-dummy",
        "Kopf writes a `kopf.zalando.org/touch-dummy` annotation to wake itself after a delay; \
         kopf-rs keeps its own timer and writes none (it removes Kopf's if found).",
    ),
    (
        "no-op-writes",
        "After a write that changed nothing, Kopf waits for a version that never comes (up to \
         its consistency timeout, 1 s in the suite's Kopf operator), and with a result of an \
         event handler written on every event, it leaves a change unhandled until the next \
         event; kopf-rs waits only for the versions its writes made. The suite's event \
         handlers return nothing, so neither shows.",
    ),
    (
        "events-from-startup-tasks",
        "`kopf.info`/`warn`/`exception`/`event` called outside of any object's processing (in \
         a task that a startup handler started) raise `LookupError` in Kopf 1.45.2, whose event \
         queue is a context variable set only in the objects' workers and the tasks they start, \
         and post nothing; kopf-rs posts them through the operator running on the caller's \
         runtime. The suite's startup task posts with the reasons `Startup` and `Noticed`: the \
         parity test checks that kopf-rs posted them, then leaves them out of the comparison.",
    ),
    (
        "late-writes",
        "When its own write has not come back on the watch within its consistency timeout, Kopf \
         takes the state it has as consistent, though older than the write (a user's change \
         that landed just before the write lacks the write's diff-base: a creation again); \
         kopf-rs reads the object then and handles its newest state. The suite's watches are \
         read promptly, so it does not show.",
    ),
    (
        "tracebacks",
        "Kopf appends a Python traceback to the log line and the Event of an arbitrary error; \
         kopf-rs has no traceback to give. Events are compared by their first line.",
    ),
];

/// The reasons of the Events that the suite's startup task posts, which only kopf-rs posts
/// ([`ALLOWED`]'s `events-from-startup-tasks`).
pub const FROM_STARTUP_TASKS: [&str; 2] = ["Startup", "Noticed"];

/// The annotation that [`ALLOWED`]'s `touch-dummy` is about.
const TOUCH_DUMMY: &str = "kopf.zalando.org/touch-dummy";

/// Fields of progress records that hold times.
const TIMES: [&str; 3] = ["started", "stopped", "delayed"];

/// Everything a run produced about its objects, by object name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Outcome {
    /// The calls of change and event handlers, in order.
    pub calls: BTreeMap<String, Vec<Value>>,
    /// The calls of daemons and timers, by handler, each in order: they run side by side, so
    /// the order between two of them is not Kopf's to keep.
    pub background: BTreeMap<String, BTreeMap<String, Vec<Value>>>,
    /// The final state: labels, annotations, finalizers, spec and status (`null` if gone).
    pub objects: BTreeMap<String, Value>,
    /// The Events posted, as `[type, reason, message]`, sorted (they are posted in batches).
    pub events: BTreeMap<String, Vec<Value>>,
    /// The log lines about the object (those prefixed `[namespace/name]`), in order; but
    /// those of daemons and timers, which run side by side, sorted.
    pub logs: BTreeMap<String, Vec<String>>,
}

impl Outcome {
    /// Collects an outcome from the calls file's text, the objects at the end, the listed
    /// Events and the operator's log.
    pub fn collect(
        names: &[String],
        calls: &str,
        objects: BTreeMap<String, Value>,
        events: &Value,
        log: &str,
    ) -> Outcome {
        let mut outcome = Outcome::default();
        for name in names {
            outcome.calls.insert(name.clone(), Vec::new());
            outcome.events.insert(name.clone(), Vec::new());
            outcome.logs.insert(name.clone(), Vec::new());
        }
        for mut call in calls
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        {
            // Kopf lists a diff's keys in Python's set order, which is no order: compared as
            // sets (kopf-rs lists them as Kopf groups them, additions, removals, changes).
            if let Some(diff) = call.get_mut("diff").and_then(Value::as_array_mut) {
                diff.sort_by_key(ToString::to_string);
            }
            let name = key(&call["namespace"], &call["name"]);
            if call.get("daemon").is_some() || call.get("timer").is_some() {
                let handler = call["handler"].as_str().unwrap_or_default().to_string();
                let by_handler = outcome.background.entry(name).or_default();
                by_handler.entry(handler).or_default().push(call);
            } else {
                outcome.calls.entry(name).or_default().push(call);
            }
        }
        for (name, object) in objects {
            outcome.objects.insert(name, state(&object));
        }
        for event in events["items"].as_array().into_iter().flatten() {
            let object = &event["involvedObject"];
            let name = key(&object["namespace"], &object["name"]);
            if let Some(posted) = outcome.events.get_mut(&name) {
                let message = event["message"].as_str().unwrap_or_default();
                let first_line = message.lines().next().unwrap_or_default();
                posted.push(Value::Array(vec![
                    event["type"].clone(),
                    event["reason"].clone(),
                    Value::String(first_line.to_string()),
                ]));
            }
        }
        for posted in outcome.events.values_mut() {
            posted.sort_by_key(ToString::to_string);
        }
        for line in log.lines() {
            let Some(rest) = line.strip_prefix('[') else {
                continue;
            };
            let Some((object, message)) = rest.split_once("] ") else {
                continue;
            };
            let name = object.strip_prefix("default/").unwrap_or(object);
            if let Some(lines) = outcome.logs.get_mut(name) {
                lines.push(message.to_string());
            }
        }
        for lines in outcome.logs.values_mut() {
            let background =
                |line: &String| line.starts_with("Daemon '") || line.starts_with("Timer '");
            let (mut side_by_side, in_order): (Vec<String>, Vec<String>) =
                lines.drain(..).partition(background);
            side_by_side.sort();
            lines.extend(in_order);
            lines.extend(side_by_side);
        }
        outcome
    }

    /// How many calls of handlers it holds.
    pub fn count_calls(&self) -> usize {
        let background = self.background.values().flat_map(BTreeMap::values);
        self.calls.values().chain(background).map(Vec::len).sum()
    }

    /// The differences from `other` (Kopf's), each a line naming the object and what differs;
    /// none when they behave the same.
    pub fn differences(&self, kopf: &Outcome) -> Vec<String> {
        let mut found = Vec::new();
        let mut compare = |what: &str, ours: Value, theirs: Value| {
            if ours != theirs {
                found.push(format!(
                    "{what}:\n    kopf:    {theirs}\n    kopf-rs: {ours}"
                ));
            }
        };
        let names: Vec<&String> = self.calls.keys().chain(kopf.calls.keys()).collect();
        let mut seen = Vec::new();
        for name in names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let get = |map: &BTreeMap<String, Vec<Value>>| {
                Value::Array(map.get(name).cloned().unwrap_or_default())
            };
            compare(
                &format!("{name}: calls"),
                get(&self.calls),
                get(&kopf.calls),
            );
            let background = |outcome: &Outcome| {
                serde_json::to_value(outcome.background.get(name)).unwrap_or_default()
            };
            compare(
                &format!("{name}: daemons and timers"),
                background(self),
                background(kopf),
            );
            compare(
                &format!("{name}: state"),
                self.objects.get(name).cloned().unwrap_or_default(),
                kopf.objects.get(name).cloned().unwrap_or_default(),
            );
            let from_handlers = |events: &BTreeMap<String, Vec<Value>>| {
                let mut events = get(events);
                if let Value::Array(events) = &mut events {
                    events.retain(|event| {
                        !FROM_STARTUP_TASKS.iter().any(|reason| event[1] == *reason)
                    });
                }
                events
            };
            compare(
                &format!("{name}: events"),
                from_handlers(&self.events),
                from_handlers(&kopf.events),
            );
            let lines = |map: &BTreeMap<String, Vec<String>>| {
                Value::from(map.get(name).cloned().unwrap_or_default())
            };
            compare(
                &format!("{name}: log"),
                lines(&self.logs),
                lines(&kopf.logs),
            );
        }
        found
    }
}

/// How the outcome names an object: `namespace/name`, or `name` alone in `default`.
fn key(namespace: &Value, name: &Value) -> String {
    let name = name.as_str().unwrap_or_default();
    match namespace.as_str() {
        Some(namespace) if namespace != "default" => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// The object's comparable state: `null` if gone; else its labels, annotations (progress
/// records with their times blanked), finalizers, spec and status.
fn state(object: &Value) -> Value {
    if object.is_null() || object["kind"] == "Status" {
        return Value::Null;
    }
    let metadata = &object["metadata"];
    let mut annotations = metadata["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.remove(TOUCH_DUMMY);
    for (key, value) in annotations.iter_mut() {
        if !key.starts_with("kopf.zalando.org/") {
            continue;
        }
        if let Some(Value::Object(mut record)) = value
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
        {
            blank_times(&mut record);
            *value = Value::Object(record);
        }
    }
    let mut status = object["status"].clone();
    if let Some(progress) = status["kopf"]["progress"].as_object_mut() {
        for record in progress.values_mut() {
            if let Value::Object(record) = record {
                blank_times(record);
            }
        }
    }
    serde_json::json!({
        "labels": metadata["labels"],
        "annotations": annotations,
        "finalizers": metadata["finalizers"],
        "spec": object["spec"],
        "status": status,
    })
}

fn blank_times(record: &mut Map<String, Value>) {
    for key in TIMES {
        if let Some(value) = record.get_mut(key)
            && !value.is_null()
        {
            *value = Value::String("<time>".into());
        }
    }
}
