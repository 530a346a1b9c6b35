//! Indexes: every return form of an index function, and handlers taking indexes by the
//! functions' names, borrowed or owned, async or sync.

use std::collections::{BTreeMap, HashMap};

use kopf::Index;
use serde_json::Value;

#[kopf::index("v1", "pods", labels("app" = present), errors = "permanent")]
async fn pods_by_app(labels: BTreeMap<String, String>, name: String) -> BTreeMap<String, String> {
    labels.into_iter().filter(|(k, _)| k == "app").map(|(_, app)| (app, name.clone())).collect()
}

#[kopf::index("v1", "pods", id = "by-node")]
fn pods_by_node(spec: &Value, name: &str) -> Option<(String, String)> {
    Some((spec["nodeName"].as_str()?.to_string(), name.to_string()))
}

#[kopf::index("kopfexamples")]
async fn names(namespace: Option<&str>, name: &str) -> kopf::Result<((), (Option<String>, String))> {
    Ok(((), (namespace.map(String::from), name.to_string())))
}

#[kopf::index("kopfexamples", retries = 3, backoff = 1)]
async fn replicas(name: String, spec: &Value, retry: u32) -> Result<HashMap<String, i64>, std::num::TryFromIntError> {
    let replicas = spec["replicas"].as_u64().unwrap_or_default();
    let _ = retry;
    Ok(HashMap::from([(name, i64::try_from(replicas)?)]))
}

#[kopf::index("kopfexamples")]
async fn owners(meta: &Value, uid: String) -> Vec<(String, String)> {
    let owners = meta["ownerReferences"].as_array().cloned().unwrap_or_default();
    owners.iter().filter_map(|o| Some((o["uid"].as_str()?.to_string(), uid.clone()))).collect()
}

#[kopf::on_create("kopfexamples")]
async fn create_fn(
    spec: &Value,
    pods_by_app: &Index<String, String>,
    pods_by_node: Index<String, String>,
    _names: &Index<(), (Option<String>, String)>,
    replicas: &kopf::Index<String, i64>,
) -> usize {
    let app = spec["app"].as_str().unwrap_or_default();
    let on_node = pods_by_node.get("node-1").map_or(0, |store| store.len());
    pods_by_app.get(app).map_or(0, |store| store.len()) + on_node + replicas.len()
}

#[kopf::on_event("kopfexamples")]
fn event_fn(owners: &Index<String, String>, uid: &str) -> bool {
    owners.contains_key(uid)
}

// An index function may read other indexes (not necessarily filled yet).
#[kopf::index("kopfexamples")]
async fn with_owners(uid: &str, owners: &Index<String, String>) -> (String, usize) {
    (uid.to_string(), owners.get(uid).map_or(0, |store| store.len()))
}

mod elsewhere {
    use kopf::Index;

    #[kopf::on_update("kopfexamples")]
    pub(crate) async fn update_fn(pods_by_app: &Index<String, String>) {
        let _ = pods_by_app.is_empty();
    }

    pub(crate) use super::pods_by_app;
}

fn main() {
    let _ = kopf::handlers![
        pods_by_app,
        pods_by_node,
        names,
        replicas,
        owners,
        with_owners,
        create_fn,
        event_fn,
        elsewhere::update_fn,
        patched,
    ];
}

// As in Kopf, an index function gets a patch, which is never applied.
#[kopf::index("v1", "pods", id = "patched")]
fn patched(name: String, patch: &mut kopf::Patch) -> (String, String) {
    patch.labels().insert("ignored".into(), "yes".into());
    (name.clone(), name)
}
