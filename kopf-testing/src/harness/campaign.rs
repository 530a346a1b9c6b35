//! The explorer's mutation campaign, after Acto (SOSP '23): a custom resource is changed one
//! field at a time along its CRD's schema, and three oracles judge the operator:
//!
//! - **effect**: a change of the desired state shows somewhere (the object's status, or other
//!   objects); fields that change nothing are reported as notes, not failures (an operator
//!   may ignore a field by design);
//! - **rollback**: changing the field back restores the state from before;
//! - **fresh start**: the same object created on a fresh server ends in the same state as the
//!   one that got there by changes (an operator whose result depends on history fails).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::explore::{Explorer, Incarnation, UNCOMPARED, differences, final_state};
use super::operator::OperatorHarness;
use kopf_fake_apiserver::DEADLINE;

/// One field changed, and what the oracles said.
#[derive(Debug, Clone)]
pub struct Mutation {
    /// The field, as a dotted path (`spec.size`).
    pub field: String,
    /// Its value before (`null` when absent).
    pub from: Value,
    /// Its value after.
    pub to: Value,
    /// Whether the change showed anywhere but in the object's own spec.
    pub took_effect: bool,
    /// What the oracles found wrong.
    pub problems: Vec<String>,
}

/// What a campaign found.
#[derive(Debug, Clone)]
pub struct Mutations {
    /// One per field changed, in schema order.
    pub mutations: Vec<Mutation>,
}

impl Mutations {
    /// The mutations with problems.
    pub fn failures(&self) -> Vec<&Mutation> {
        self.mutations
            .iter()
            .filter(|m| !m.problems.is_empty())
            .collect()
    }

    /// Fields whose change showed nowhere.
    pub fn without_effect(&self) -> Vec<&str> {
        self.mutations
            .iter()
            .filter(|m| !m.took_effect)
            .map(|m| m.field.as_str())
            .collect()
    }

    /// Panics with every failing mutation and what went wrong, if any.
    pub fn assert_ok(&self) {
        let failures = self.failures();
        if failures.is_empty() {
            return;
        }
        let text: Vec<String> = failures
            .iter()
            .map(|m| {
                format!(
                    "{} from {} to {}:\n{}",
                    m.field,
                    m.from,
                    m.to,
                    m.problems
                        .iter()
                        .map(|p| format!("  - {p}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            })
            .collect();
        panic!(
            "{} of {} mutations failed:\n{}",
            failures.len(),
            self.mutations.len(),
            text.join("\n")
        );
    }
}

/// A server with the setup applied and an operator running on it.
struct Session {
    harness: OperatorHarness,
    incarnation: Incarnation,
}

impl Session {
    async fn start(explorer: &Explorer) -> Session {
        let server = explorer.start_server().await;
        let harness = OperatorHarness::without_operator(server, None);
        for yaml in explorer.setup_documents() {
            harness.apply(yaml).await;
        }
        let incarnation = Incarnation::launch(explorer.operator_factory(), harness.server());
        incarnation.ready().await;
        Session {
            harness,
            incarnation,
        }
    }

    /// The state once the operator is quiet.
    async fn settled_state(
        &self,
        ignored: &[String],
    ) -> Result<BTreeMap<String, Vec<Value>>, String> {
        let server = self.harness.server();
        if !server
            .wait_quiet_but(&UNCOMPARED, Duration::from_millis(500), DEADLINE)
            .await
        {
            return Err("the operator did not go quiet: it kept writing".into());
        }
        Ok(final_state(&server.journal(), ignored))
    }

    async fn stop(self) -> Option<String> {
        self.incarnation.stop().await.err()
    }
}

impl Explorer {
    /// Runs the mutation campaign on `object` (YAML or JSON of one custom resource, whose CRD
    /// the setup applies): every field of its `spec` that the CRD's schema declares (or, for
    /// a schema that keeps unknown fields, that the object has) is changed in turn, then
    /// changed back, then set on a fresh server; see the module docs for the oracles.
    ///
    /// # Panics
    ///
    /// When the object does not parse or has no CRD in the setup.
    pub async fn mutate(&self, object: &str) -> Mutations {
        let object: Value = serde_norway::from_str(object)
            .unwrap_or_else(|e| panic!("the object to mutate does not parse: {e}"));
        let session = Session::start(self).await;
        let schema = spec_schema(&session.harness, &object).await;
        session.harness.apply_value(object.clone()).await;
        let mut mutations = Vec::new();
        let mut before = match session.settled_state(self.ignored_paths()).await {
            Ok(state) => state,
            Err(problem) => {
                mutations.push(Mutation {
                    field: "(creation)".into(),
                    from: Value::Null,
                    to: object.clone(),
                    took_effect: false,
                    problems: vec![problem],
                });
                session.stop().await;
                return Mutations { mutations };
            }
        };
        let key = object_key(&session.harness, &object).await;
        for (path, from, to) in candidates(&schema, &object["spec"], "spec") {
            let mut problems = Vec::new();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let resource = key.0.as_str();
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            let set = |value: &Value| merge_patch_at(&path, value.clone());
            session
                .harness
                .patch(resource, namespace, name, set(&to))
                .await;
            let after = session.settled_state(self.ignored_paths()).await;
            let after = match after {
                Ok(after) => after,
                Err(problem) => {
                    problems.push(problem);
                    before.clone()
                }
            };
            let took_effect = has_effect(&before, &after, &key.1);
            // Rollback: the field as it was.
            session
                .harness
                .patch(resource, namespace, name, set(&from))
                .await;
            match session.settled_state(self.ignored_paths()).await {
                Ok(rolled_back) => {
                    for difference in
                        differences(&without_history(&before), &without_history(&rolled_back))
                    {
                        problems.push(format!("after changing it back: {difference}"));
                    }
                    before = rolled_back;
                }
                Err(problem) => problems.push(problem),
            }
            // Fresh start: the mutated object, created on a new server.
            let mut mutated = object.clone();
            set_at(&mut mutated, &path, to.clone());
            let fresh = Session::start(self).await;
            fresh.harness.apply_value(mutated).await;
            match fresh.settled_state(self.ignored_paths()).await {
                Ok(state) => {
                    for difference in
                        differences(&without_history(&after), &without_history(&state))
                    {
                        problems.push(format!("created so on a fresh server: {difference}"));
                    }
                }
                Err(problem) => problems.push(format!("created so on a fresh server: {problem}")),
            }
            if let Some(error) = fresh.stop().await {
                problems.push(format!("the fresh operator did not stop cleanly: {error}"));
            }
            mutations.push(Mutation {
                field: path,
                from,
                to,
                took_effect,
                problems,
            });
        }
        if let Some(error) = session.stop().await
            && let Some(last) = mutations.last_mut()
        {
            last.problems
                .push(format!("the operator did not stop cleanly: {error}"));
        }
        Mutations { mutations }
    }
}

/// The object's resource (as the state names it) and its key in the state.
async fn object_key(harness: &OperatorHarness, object: &Value) -> (String, String) {
    let kind = object["kind"].as_str().unwrap_or_default();
    let crd = crd_of(harness, object)
        .await
        .unwrap_or_else(|| panic!("no CRD in the setup serves the kind {kind}"));
    let resource = format!(
        "{}.{}",
        crd["spec"]["names"]["plural"].as_str().unwrap_or_default(),
        crd["spec"]["group"].as_str().unwrap_or_default()
    );
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    (resource.clone(), format!("{resource} {namespace}/{name}"))
}

/// The CRD serving the object's kind, as the server holds it now.
async fn crd_of(harness: &OperatorHarness, object: &Value) -> Option<Value> {
    let (group, _) = object["apiVersion"].as_str()?.split_once('/')?;
    let kind = object["kind"].as_str()?;
    let mut crds: BTreeMap<String, Value> = BTreeMap::new();
    for change in harness.server().journal() {
        if change.resource != "customresourcedefinitions.apiextensions.k8s.io" {
            continue;
        }
        let name = change.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if change.event == "DELETED" {
            crds.remove(&name);
        } else {
            crds.insert(name, change.object);
        }
    }
    crds.into_values()
        .find(|crd| crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == kind)
}

/// The schema of the object's `spec` (`{}` when the CRD declares none).
async fn spec_schema(harness: &OperatorHarness, object: &Value) -> Value {
    let version = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    let Some(crd) = crd_of(harness, object).await else {
        panic!(
            "no CRD in the setup serves the kind {} (apply it with Explorer::setup)",
            object["kind"]
        );
    };
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == version.as_str())
        .map(|v| v["schema"]["openAPIV3Schema"]["properties"]["spec"].clone())
        .unwrap_or(json!({}))
}

/// The fields to change: `(path, from, to)` for every leaf the schema declares (or the object
/// has, where the schema keeps unknown fields).
fn candidates(schema: &Value, value: &Value, path: &str) -> Vec<(String, Value, Value)> {
    let mut found = Vec::new();
    let declared = schema["properties"].as_object();
    let mut fields: BTreeMap<String, (Value, Value)> = BTreeMap::new();
    for (key, sub) in declared.into_iter().flatten() {
        fields.insert(key.clone(), (sub.clone(), value[key].clone()));
    }
    if schema["x-kubernetes-preserve-unknown-fields"] == true || declared.is_none() {
        for (key, current) in value.as_object().into_iter().flatten() {
            fields
                .entry(key.clone())
                .or_insert_with(|| (json!({}), current.clone()));
        }
    }
    for (key, (sub, current)) in fields {
        let here = format!("{path}.{key}");
        let kind = sub["type"].as_str().unwrap_or(match &current {
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::Null => "",
        });
        if kind == "object" {
            found.extend(candidates(&sub, &current, &here));
            continue;
        }
        if let Some(to) = changed(&sub, kind, &current) {
            found.push((here, current, to));
        }
    }
    found
}

/// Another valid value for a field: the next enum value, a number one step further (within
/// its bounds), another string, the other boolean, a list with one more item.
fn changed(schema: &Value, kind: &str, current: &Value) -> Option<Value> {
    if let Some(options) = schema["enum"].as_array() {
        let position = options.iter().position(|o| o == current);
        return options
            .iter()
            .cycle()
            .skip(position.map_or(0, |p| p + 1))
            .take(options.len())
            .find(|o| *o != current)
            .cloned();
    }
    match kind {
        "integer" => {
            let now = current.as_i64().unwrap_or(0);
            let max = schema["maximum"].as_i64().unwrap_or(i64::MAX);
            let min = schema["minimum"].as_i64().unwrap_or(i64::MIN);
            let next = if now < max { now + 1 } else { now - 1 };
            (next >= min).then(|| json!(next))
        }
        "number" => Some(json!(current.as_f64().unwrap_or(0.0) + 0.5)),
        "boolean" => Some(json!(!current.as_bool().unwrap_or(false))),
        "string" if schema["format"].is_string() || schema["pattern"].is_string() => None,
        "string" => Some(json!(format!(
            "{}-mutated",
            current.as_str().unwrap_or("value")
        ))),
        "array" => {
            let mut items = current.as_array().cloned().unwrap_or_default();
            let item = items.first().cloned()?;
            items.push(item);
            Some(Value::Array(items))
        }
        _ => None,
    }
}

/// A merge patch setting a dotted path (`null` removes the field).
fn merge_patch_at(path: &str, value: Value) -> Value {
    path.rsplit('.').fold(value, |inner, key| {
        Value::Object(Map::from_iter([(key.to_string(), inner)]))
    })
}

/// Sets a dotted path in an object, making the objects on the way.
fn set_at(object: &mut Value, path: &str, value: Value) {
    let mut parts = path.split('.').peekable();
    let mut here = object;
    while let Some(key) = parts.next() {
        if !here.is_object() {
            *here = json!({});
        }
        let map = here.as_object_mut().expect("just made an object");
        if parts.peek().is_none() {
            if value.is_null() {
                map.remove(key);
            } else {
                map.insert(key.to_string(), value);
            }
            return;
        }
        here = map.entry(key.to_string()).or_insert_with(|| json!({}));
    }
}

/// Whether anything but the object's own spec and kopf's records on it changed.
fn has_effect(
    before: &BTreeMap<String, Vec<Value>>,
    after: &BTreeMap<String, Vec<Value>>,
    key: &str,
) -> bool {
    let outputs = |state: &BTreeMap<String, Vec<Value>>| {
        let mut state = state.clone();
        if let Some(objects) = state.get_mut(key) {
            for object in objects {
                if let Some(object) = object.as_object_mut() {
                    object.remove("spec");
                }
                if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                    annotations.retain(|k, _| !k.starts_with("kopf.zalando.org/"));
                }
            }
        }
        state
    };
    outputs(before) != outputs(after)
}

/// The state without what records how it was reached rather than what it is: kopf's
/// diff-base keeps the last handled spec, which a rollback or a fresh start legitimately
/// writes in another key order.
fn without_history(state: &BTreeMap<String, Vec<Value>>) -> BTreeMap<String, Vec<Value>> {
    let mut state = state.clone();
    for objects in state.values_mut() {
        for object in objects {
            if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                annotations.retain(|k, _| !k.starts_with("kopf.zalando.org/"));
            }
        }
    }
    state
}
