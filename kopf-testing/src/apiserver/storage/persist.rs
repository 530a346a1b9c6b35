//! The state file: objects survive a restart of the `kopf-fake-apiserver` binary.

use std::path::Path;

use serde_json::Value;

use super::catalog::ResourceDef;
use super::state::State;

/// Loads objects saved by [`save`]; a missing file is an empty cluster.
pub(crate) async fn load(state: &mut State, path: &Path) -> std::io::Result<()> {
    let text = match tokio::fs::read(path).await {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let snapshot: Value = serde_json::from_slice(&text).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("state file {}: {e}", path.display()),
        )
    })?;
    let entries = snapshot["objects"].as_array().cloned().unwrap_or_default();
    // CRDs first, so that their resources are served when their objects come.
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = entries
        .iter()
        .partition(|e| e["resource"] == "customresourcedefinitions");
    for entry in crds.into_iter().chain(rest) {
        let group = entry["group"].as_str().unwrap_or_default();
        let plural = entry["resource"].as_str().unwrap_or_default();
        let def = state.catalog.get(group, plural).cloned();
        match def {
            Some(def) => {
                state.restore_object(&def, entry["object"].clone());
                if plural == "customresourcedefinitions"
                    && let Ok(crd_def) = ResourceDef::from_crd(&entry["object"])
                {
                    state.catalog.insert(crd_def);
                }
            }
            None => tracing::warn!(
                group,
                plural,
                "state file: skipping an object of an unknown resource"
            ),
        }
    }
    state.restore_resource_version(snapshot["resourceVersion"].as_u64().unwrap_or(0));
    Ok(())
}

/// Writes all objects to `path` (via a temporary file, so a crash never leaves half a file).
/// `snapshot` is what [`State::snapshot`] returns.
pub(crate) async fn save(snapshot: &Value, path: &Path) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(snapshot).map_err(std::io::Error::other)?;
    let temporary = path.with_extension("tmp");
    tokio::fs::write(&temporary, text).await?;
    tokio::fs::rename(&temporary, path).await
}
