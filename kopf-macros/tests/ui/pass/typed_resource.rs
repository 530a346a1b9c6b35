//! A typed resource (`#[derive(CustomResource)]`) selects the handler's resource, and the
//! object and its spec arrive as the user's types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "kopf.dev", version = "v1", kind = "KopfExample", namespaced)]
pub struct KopfExampleSpec {
    field: Option<String>,
    items: Vec<String>,
}

#[derive(Serialize)]
struct Created {
    message: String,
}

#[kopf::on_create(KopfExample, id = "create")]
async fn create_fn(body: KopfExample, spec: KopfExampleSpec) -> kopf::Result<Created> {
    let name = kube::ResourceExt::name_any(&body);
    Ok(Created {
        message: format!("{name}: {} items", spec.items.len()),
    })
}

#[kopf::on_field(KopfExample, field = "spec.field", old = absent)]
async fn field_fn(new: Option<String>) -> Option<String> {
    new
}

fn main() {
    let registry = kopf::handlers![create_fn, field_fn];
    let _ = registry;
}
