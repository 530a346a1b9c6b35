//! A typed custom resource with kube-derive: `#[derive(CustomResource)]` declares the
//! resource, its CRD and its types; handlers select it by type and receive its spec and body
//! as those types. `Registry::crd` lets the operator binary print the CRD
//! (`cargo run --example typed -- crd | kubectl apply -f -`).
//!
//! A handler's result is stored at `status.<handler>`: the status type declares that field,
//! or the API server prunes it (the CRD's schema is generated from the types).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A greeting to make to someone, a number of times.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "gallery.kopf.dev",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    shortname = "greet"
)]
pub struct GreetingSpec {
    /// Whom to greet.
    pub name: String,
    /// How many times.
    #[serde(default = "once")]
    pub times: u32,
}

fn once() -> u32 {
    1
}

/// What the operator made of a greeting.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct GreetingStatus {
    /// The result of [`greet`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greet: Option<Greeted>,
}

/// The greeting, made.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct Greeted {
    /// The words.
    pub message: String,
    /// The greeting's own name.
    pub by: String,
}

/// The greeting that `spec` asks for, made by the greeting `by`.
pub fn greeting(spec: &GreetingSpec, by: &str) -> Greeted {
    let words = vec![format!("hello, {}", spec.name); spec.times as usize];
    Greeted {
        message: words.join("; "),
        by: by.to_string(),
    }
}

/// Greets: the spec arrives as [`GreetingSpec`], the whole object as [`Greeting`].
#[kopf::on_create(Greeting)]
pub async fn greet(spec: GreetingSpec, body: Greeting) -> Greeted {
    greeting(&spec, &kube::ResourceExt::name_any(&body))
}

/// Greets again when the spec changes (the new spec typed too), by patching the status.
#[kopf::on_update(Greeting, field = "spec")]
pub async fn regreet(new: Option<GreetingSpec>, name: &str, patch: &mut kopf::Patch) {
    if let Some(spec) = new {
        let greeted = serde_json::to_value(greeting(&spec, name)).expect("a greeting serializes");
        patch.status().insert("greet".into(), greeted);
    }
}
