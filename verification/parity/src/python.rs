//! The project's virtualenv with Kopf (made by `scripts/python-env` on first use), or a loud
//! skip: where Python is missing, the suite says so and passes, except under CI, where it
//! fails.

use std::path::PathBuf;
use std::process::Command;

/// Whether we run under CI, where a missing Python is a failure rather than a skip.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The virtualenv's python with Kopf; `None` (after saying why, loudly) when there is none,
/// and a panic instead under CI. Blocking: call it before the runtime, or off it.
pub fn python(test: &str) -> Option<PathBuf> {
    let found = find();
    match found {
        Ok(python) => Some(python),
        Err(why) if in_ci() => {
            panic!("{test}: {why} (CI is set, so this is a failure, not a skip)")
        }
        Err(why) => {
            eprintln!("\n!!! SKIPPED {test}: {why}\n");
            None
        }
    }
}

fn find() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .any(|dir| dir.join("python3").is_file());
    if !on_path && std::env::var_os("PYTHON").is_none() {
        return Err("python3 is not installed (not found in PATH)".into());
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/python-env");
    let output = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|error| format!("running {}: {error}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "scripts/python-env failed (pip could not install kopf?): {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}
