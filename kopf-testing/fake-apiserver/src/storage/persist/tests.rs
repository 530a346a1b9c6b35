//! The state log on disk: batches replayed in order, a torn tail dropped at any cut, damage
//! before the tail refused, compaction (and its failures at every step), files of the older
//! format, and the file's mode.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::durability::Unsaved;
use super::error::StateFileError;
use super::log_file::{LogFile, Step};
use super::replay::{Contents, read, restore};
use crate::storage::catalog::ResourceDef;
use crate::storage::state::State;

fn configmaps(state: &State) -> Arc<ResourceDef> {
    state.catalog.get("", "configmaps").cloned().unwrap()
}

fn configmap(name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "data": {"value": value},
    })
}

/// A state that queues its mutations, with a log for it in a fresh directory.
fn fresh() -> (tempfile::TempDir, PathBuf, State, LogFile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let mut state = State::new(100);
    state.keep_unsaved();
    let log = LogFile::create(&path, state.stored(), state.resource_version()).unwrap();
    (dir, path, state, log)
}

/// What the state has queued since last time, as one write.
fn unsaved(state: &mut State) -> Unsaved {
    Unsaved {
        mutations: state.take_unsaved(),
        resource_version: state.resource_version(),
    }
}

/// What `state` holds, as a state file would say it.
fn contents_of(state: &State) -> Contents {
    let mut contents = Contents {
        resource_version: state.resource_version(),
        ..Contents::default()
    };
    for (resource, object) in state.stored() {
        contents
            .objects
            .entry(resource.clone())
            .or_default()
            .insert(crate::storage::state::key_of(object), (**object).clone());
    }
    contents
}

fn len(path: &Path) -> usize {
    std::fs::metadata(path).unwrap().len() as usize
}

#[test]
fn a_log_replays_its_batches_in_order() {
    let (_dir, path, mut state, mut log) = fresh();
    let def = configmaps(&state);
    state.put(&def, configmap("kept", "1"));
    state.put(&def, configmap("gone", "1"));
    let first = unsaved(&mut state);
    state.put(&def, configmap("kept", "2"));
    state.remove(&def, &("default".into(), "gone".into()));
    let second = unsaved(&mut state);
    log.append(&[first, second]).unwrap();

    let contents = read(&path).unwrap();
    assert_eq!(contents, contents_of(&state));
    assert_eq!(contents.resource_version, 4);
    let kept =
        &contents.objects[&("".into(), "configmaps".into())][&("default".into(), "kept".into())];
    assert_eq!(kept["data"]["value"], "2");
    assert_eq!(kept["metadata"]["resourceVersion"], "3");
}

#[test]
fn a_torn_last_batch_is_dropped_wherever_the_write_stopped() {
    let (dir, path, mut state, mut log) = fresh();
    let def = configmaps(&state);
    state.put(&def, configmap("first", "1"));
    log.append(&[unsaved(&mut state)]).unwrap();
    let after_first = contents_of(&state);
    let sealed = len(&path);
    state.put(&def, configmap("second", "2"));
    state.put(&def, configmap("first", "changed"));
    log.append(&[unsaved(&mut state)]).unwrap();
    let whole = std::fs::read(&path).unwrap();

    let torn = dir.path().join("torn.json");
    for cut in sealed..whole.len() {
        std::fs::write(&torn, &whole[..cut]).unwrap();
        assert_eq!(read(&torn).unwrap(), after_first, "cut at byte {cut}");
    }
    // A crashed file system may also leave zeros or garbage where the last batch was.
    let mut zeroed = whole[..sealed].to_vec();
    zeroed.extend(std::iter::repeat_n(0, whole.len() - sealed));
    std::fs::write(&torn, &zeroed).unwrap();
    assert_eq!(read(&torn).unwrap(), after_first);
    let mut garbled = whole.clone();
    garbled[sealed + 20] ^= 0x20;
    std::fs::write(&torn, &garbled).unwrap();
    assert_eq!(read(&torn).unwrap(), after_first);

    std::fs::write(&torn, &whole).unwrap();
    assert_eq!(read(&torn).unwrap(), contents_of(&state));
}

#[test]
fn damage_before_the_last_batch_is_an_error_naming_the_file_and_line() {
    let (_dir, path, mut state, mut log) = fresh();
    let def = configmaps(&state);
    for value in ["1", "2", "3"] {
        state.put(&def, configmap("cm", value));
        log.append(&[unsaved(&mut state)]).unwrap();
    }
    let whole = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    // Header, snapshot seal, then a put and a seal per batch: the second put is line 5.
    assert!(lines[4].contains(r#""value":"2""#), "{}", lines[4]);

    let changed = whole.replacen(r#""value":"2""#, r#""value":"X""#, 1);
    std::fs::write(&path, changed).unwrap();
    let error = read(&path).unwrap_err();
    assert!(
        matches!(error, StateFileError::Corrupt { line: 5, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("lines 5-6"), "{message}");

    let garbled = whole.replacen(lines[4], "{not json", 1);
    std::fs::write(&path, garbled).unwrap();
    let error = read(&path).unwrap_err();
    assert!(
        matches!(error, StateFileError::Corrupt { line: 5, .. }),
        "{error:?}"
    );
}

#[test]
fn a_damaged_snapshot_is_an_error_even_at_the_end_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let mut state = State::new(100);
    let def = configmaps(&state);
    state.put(&def, configmap("precious", "1"));
    LogFile::create(&path, state.stored(), state.resource_version()).unwrap();
    let whole = std::fs::read_to_string(&path).unwrap();

    let damaged = whole.replacen("precious", "precioUs", 1);
    std::fs::write(&path, damaged).unwrap();
    let error = read(&path).unwrap_err();
    assert!(
        matches!(error, StateFileError::Corrupt { line: 2, .. }),
        "{error:?}"
    );
    // Compactions are renamed into place once complete: a short snapshot is no crash's doing.
    std::fs::write(&path, &whole[..whole.len() - 10]).unwrap();
    let error = read(&path).unwrap_err();
    assert!(
        matches!(error, StateFileError::Corrupt { line: 2, .. }),
        "{error:?}"
    );
}

#[test]
fn the_log_is_compacted_once_it_outgrows_its_live_objects() {
    let (dir, path, mut state, log) = fresh();
    let mut log = log.with_compaction_floor(4096);
    let def = configmaps(&state);
    state.put(&def, configmap("deleted", "x"));
    log.append(&[unsaved(&mut state)]).unwrap();
    state.remove(&def, &("default".into(), "deleted".into()));
    log.append(&[unsaved(&mut state)]).unwrap();
    let mut largest = 0;
    for round in 0..500 {
        state.put(&def, configmap("busy", &round.to_string()));
        log.append(&[unsaved(&mut state)]).unwrap();
        largest = largest.max(len(&path));
    }
    assert!(largest < 4096 + 1024, "the log grew to {largest} bytes");
    let contents = read(&path).unwrap();
    assert_eq!(contents, contents_of(&state));
    assert_eq!(
        contents.resource_version, 502,
        "the version outlives the deleted object"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["state.json"], "no temporary file is left");
}

/// The names of the files in `dir`.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A compaction that fails before its rename (at the temporary file's creation, writing or
/// fsync, or at the rename) leaves the log as it was: every later write is appended to it and
/// saved, and no temporary file is left behind.
#[test]
fn a_compaction_failing_before_its_rename_keeps_appending_to_the_log() {
    for step in [Step::Create, Step::Write, Step::Sync, Step::Rename] {
        let (dir, path, mut state, log) = fresh();
        let mut log = log.with_compaction_floor(1024).failing_compactions_at(step);
        let def = configmaps(&state);
        for round in 0..200 {
            state.put(&def, configmap("busy", &round.to_string()));
            if let Err(error) = log.append(&[unsaved(&mut state)]) {
                panic!("failing at {step:?}: round {round} was refused: {error}");
            }
        }
        assert!(
            len(&path) > 4 * 1024,
            "failing at {step:?}: the log was compacted after all"
        );
        assert_eq!(
            read(&path).unwrap(),
            contents_of(&state),
            "failing at {step:?}: the log lost writes"
        );
        assert_eq!(files_in(dir.path()), ["state.json"], "failing at {step:?}");
    }
}

/// A compaction whose rename cannot be made durable (the directory's fsync fails) leaves two
/// files a crash could choose between: no later write is acknowledged, and the file the path
/// names holds every write that was.
#[test]
fn a_compaction_whose_rename_is_not_durable_acknowledges_no_later_write() {
    let (_dir, path, mut state, log) = fresh();
    let mut log = log
        .with_compaction_floor(1024)
        .failing_compactions_at(Step::SyncDirectory);
    let def = configmaps(&state);
    let mut acknowledged = None;
    let mut refusal = None;
    for round in 0..200 {
        state.put(&def, configmap("busy", &round.to_string()));
        match log.append(&[unsaved(&mut state)]) {
            Ok(()) => acknowledged = Some(contents_of(&state)),
            Err(error) => {
                refusal = Some(error.to_string());
                break;
            }
        }
    }
    let refusal = refusal.expect("writes after the failed compaction were acknowledged");
    assert!(
        refusal.contains("could not be made durable") && refusal.contains("restart the server"),
        "{refusal}"
    );
    assert_eq!(
        read(&path).unwrap(),
        acknowledged.expect("writes before the compaction were acknowledged"),
        "the file at the path lost an acknowledged write"
    );
    // Refused for good: the next write too.
    state.put(&def, configmap("later", "x"));
    assert!(log.append(&[unsaved(&mut state)]).is_err());
}

/// The state file holds Secrets: only its owner may read it, from the start and after every
/// compaction.
#[cfg(unix)]
#[test]
fn the_state_file_is_its_owners_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let (_dir, path, mut state, log) = fresh();
    assert_eq!(mode(&path), 0o600);
    let mut log = log.with_compaction_floor(1024);
    let def = configmaps(&state);
    for round in 0..200 {
        state.put(&def, configmap("busy", &round.to_string()));
        log.append(&[unsaved(&mut state)]).unwrap();
    }
    assert!(len(&path) < 4 * 1024, "the log was compacted");
    assert_eq!(mode(&path), 0o600);
}

const KEX_CRD: &str = r#"{
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "kopfexamples.kopf.dev", "uid": "uid-crd", "resourceVersion": "7"},
    "spec": {"group": "kopf.dev", "scope": "Namespaced",
             "names": {"plural": "kopfexamples", "singular": "kopfexample", "kind": "KopfExample"},
             "versions": [{"name": "v1", "served": true, "storage": true,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}}]}
}"#;

/// A file as earlier versions saved it, with a custom resource listed before its CRD.
fn older_snapshot() -> Value {
    let kex = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                     "metadata": {"name": "kex", "namespace": "default", "uid": "uid-kex", "resourceVersion": "9"}});
    let crd: Value = serde_json::from_str(KEX_CRD).unwrap();
    json!({"resourceVersion": 57, "objects": [
        {"group": "kopf.dev", "resource": "kopfexamples", "object": kex},
        {"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions", "object": crd},
    ]})
}

#[test]
fn an_older_snapshot_loads_and_is_rewritten_as_a_log_with_crds_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&older_snapshot()).unwrap()).unwrap();

    let mut state = State::new(100);
    restore(&mut state, read(&path).unwrap());
    assert_eq!(state.resource_version(), 57);
    assert!(
        state.catalog.get("kopf.dev", "kopfexamples").is_some(),
        "the CRD serves its resource"
    );
    let kex = state.get(
        &("kopf.dev".into(), "kopfexamples".into()),
        &("default".into(), "kex".into()),
    );
    assert_eq!(kex.unwrap()["metadata"]["uid"], "uid-kex");

    LogFile::create(&path, state.stored(), state.resource_version()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"format":"kopf-fake-apiserver state log","version":1}"#
    );
    assert!(
        lines[1].contains("customresourcedefinitions"),
        "CRDs first: {}",
        lines[1]
    );
    assert!(lines[2].contains("kopfexamples"), "{}", lines[2]);
    let mut again = State::new(100);
    restore(&mut again, read(&path).unwrap());
    assert_eq!(contents_of(&again), contents_of(&state));
}

#[test]
fn a_missing_or_empty_file_is_an_empty_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    assert_eq!(read(&path).unwrap(), Contents::default());
    std::fs::write(&path, "").unwrap();
    assert_eq!(read(&path).unwrap(), Contents::default());
}

#[test]
fn a_file_that_is_no_state_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "shopping list\n").unwrap();
    let error = read(&path).unwrap_err();
    assert!(
        matches!(error, StateFileError::Unrecognized { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("notes.txt"), "{error}");

    std::fs::write(
        &path,
        "{\"format\":\"kopf-fake-apiserver state log\",\"version\":2}\n",
    )
    .unwrap();
    let error = read(&path).unwrap_err();
    assert!(error.to_string().contains("format version 2"), "{error}");
}
