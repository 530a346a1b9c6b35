//! How fast the fake API server is, measured from loopback clients:
//!
//! - PATCHes per second on small objects, with several requests in flight;
//! - creates per second, in memory and with a state file (each write fsync'd before it is
//!   answered, writes in flight together sharing an fsync), one and several in flight;
//! - one change fanned out to 100 watchers: time until every watcher has it;
//! - memory per stored object (resident set growth over 10,000 ConfigMaps);
//! - the watch history staying bounded under a stream of changes;
//! - creates and patches per second among 10,000 objects owned by one owner (the garbage
//!   collector's work on the write path).
//!
//! `cargo run --release -p kopf-bench --bin fake-apiserver-bench [-- --objects N --patches N
//! --creates N --watchers N --memory-objects N]`. Figures are for comparing runs on one machine; they are
//! never asserted in tests.

use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kopf_testing::FakeApiServer;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

struct Sizes {
    objects: usize,
    patches: usize,
    creates: usize,
    concurrency: usize,
    watchers: usize,
    rounds: usize,
    memory_objects: usize,
    history_limit: usize,
    owned_objects: usize,
}

fn sizes() -> Sizes {
    let mut sizes = Sizes {
        objects: 100,
        patches: 20_000,
        creates: 2_000,
        concurrency: 8,
        watchers: 100,
        rounds: 50,
        memory_objects: 10_000,
        history_limit: 10_000,
        owned_objects: 10_000,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        let Some(value) = value else {
            eprintln!(
                "usage: fake-apiserver-bench [--objects N] [--patches N] [--creates N] [--concurrency N] [--watchers N] [--rounds N] [--memory-objects N] [--history-limit N] [--owned-objects N]"
            );
            std::process::exit(2);
        };
        match pair[0].as_str() {
            "--objects" => sizes.objects = value,
            "--patches" => sizes.patches = value,
            "--creates" => sizes.creates = value,
            "--concurrency" => sizes.concurrency = value,
            "--watchers" => sizes.watchers = value,
            "--rounds" => sizes.rounds = value,
            "--memory-objects" => sizes.memory_objects = value,
            "--history-limit" => sizes.history_limit = value,
            "--owned-objects" => sizes.owned_objects = value,
            other => {
                eprintln!("unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    sizes
}

/// The resident set size of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"key": "value"}}))
        .expect("a valid ConfigMap")
}

async fn patches_per_second(server: &FakeApiServer, sizes: &Sizes) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for i in 0..sizes.objects {
        api.create(&PostParams::default(), &configmap(&format!("patched-{i}")))
            .await
            .expect("created");
    }
    let started = Instant::now();
    let per_task = sizes.patches / sizes.concurrency;
    let tasks: Vec<_> = (0..sizes.concurrency)
        .map(|task| {
            let api = api.clone();
            let objects = sizes.objects;
            tokio::spawn(async move {
                for i in 0..per_task {
                    let name = format!("patched-{}", (task * 7919 + i * 31) % objects);
                    let patch = json!({"data": {"counter": format!("{task}-{i}")}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .expect("patched");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("the patching task finished");
    }
    let elapsed = started.elapsed();
    let total = per_task * sizes.concurrency;
    println!(
        "| merge PATCH, {} objects, {} in flight | {:.0} patches/s ({total} in {:.2} s) |",
        sizes.objects,
        sizes.concurrency,
        total as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
}

/// Creates ConfigMaps with `concurrency` requests in flight, on a fresh server: in memory, or
/// with a state file in a fresh directory.
async fn creates_per_second(sizes: &Sizes, concurrency: usize, state_file: bool) {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let path = directory.path().join("state.json");
    let mut builder = FakeApiServer::builder().history_limit(sizes.history_limit);
    if state_file {
        builder = builder.state_file(&path);
    }
    let server = builder.start().await.expect("the server starts");
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let started = Instant::now();
    futures::stream::iter(0..sizes.creates)
        .for_each_concurrent(concurrency, |i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &configmap(&format!("created-{i}")))
                    .await
                    .expect("created");
            }
        })
        .await;
    let elapsed = started.elapsed();
    let storage = if state_file {
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        format!(
            "state file ({:.1} MiB after)",
            size as f64 / (1024.0 * 1024.0)
        )
    } else {
        "in memory".to_string()
    };
    println!(
        "| ConfigMap creates, {concurrency} in flight, {storage} | {:.0} creates/s ({} in {:.2} s) |",
        sizes.creates as f64 / elapsed.as_secs_f64(),
        sizes.creates,
        elapsed.as_secs_f64()
    );
    server.stop().await;
}

async fn fan_out(server: &FakeApiServer, sizes: &Sizes) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &configmap("watched"))
        .await
        .expect("created");
    let rv = api
        .list_metadata(&Default::default())
        .await
        .expect("listed")
        .metadata
        .resource_version
        .unwrap_or_default();
    let (sender, _) = tokio::sync::broadcast::channel::<()>(1);
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut watchers = Vec::new();
    for _ in 0..sizes.watchers {
        // Each watcher has its own client, hence its own connection, as separate operators would.
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        let params = WatchParams::default().fields("metadata.name=watched");
        let stream = api.watch(&params, &rv).await.expect("watching").boxed();
        let seen = seen_tx.clone();
        let mut stop = sender.subscribe();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream;
            let mut round = 0;
            loop {
                tokio::select! {
                    _ = stop.recv() => return,
                    event = stream.try_next() => match event {
                        Ok(Some(WatchEvent::Modified(_))) => {
                            round += 1;
                            let _ = seen.send((round, Instant::now()));
                        }
                        Ok(Some(_)) => {}
                        _ => return,
                    }
                }
            }
        }));
    }
    drop(seen_tx);
    let mut latencies = Vec::new();
    for round in 1..=sizes.rounds {
        let started = Instant::now();
        let patch = json!({"data": {"round": round.to_string()}});
        api.patch("watched", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patched");
        let mut last = started;
        for _ in 0..sizes.watchers {
            let (seen_round, at) = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
                .await
                .expect("every watcher sees the change")
                .expect("watchers are alive");
            assert_eq!(seen_round, round, "watchers see changes in order");
            last = last.max(at);
        }
        latencies.push(last - started);
    }
    let _ = sender.send(());
    for watcher in watchers {
        let _ = watcher.await;
    }
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)];
    println!(
        "| one change to {} watchers, until the last has it | p50 {:.2} ms, p99 {:.2} ms ({:.0} events/s delivered) |",
        sizes.watchers,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        sizes.watchers as f64 / p50.as_secs_f64()
    );
}

async fn memory_per_object(server: &FakeApiServer, sizes: &Sizes) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let before = rss();
    futures::stream::iter(0..sizes.memory_objects)
        .for_each_concurrent(8, |i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &configmap(&format!("stored-{i}")))
                    .await
                    .expect("created");
            }
        })
        .await;
    server.compact();
    let after = rss();
    println!(
        "| memory per stored ConfigMap ({} stored, history compacted) | {:.0} bytes (resident set +{:.1} MiB) |",
        sizes.memory_objects,
        (after.saturating_sub(before)) as f64 / sizes.memory_objects as f64,
        (after.saturating_sub(before)) as f64 / (1024.0 * 1024.0)
    );
}

/// The write path among many owned objects: each write of an owned object makes the garbage
/// collector look at its owner.
async fn owned_writes(server: &FakeApiServer, sizes: &Sizes) {
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = api
        .create(&PostParams::default(), &configmap("owner"))
        .await
        .expect("created");
    let reference = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
        "uid": owner.metadata.uid.clone().expect("a uid"),
    }]);
    let owned = |name: String| -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": reference},
            "data": {"key": "value"},
        }))
        .expect("a valid ConfigMap")
    };
    let started = Instant::now();
    futures::stream::iter(0..sizes.owned_objects)
        .for_each_concurrent(8, |i| {
            let api = api.clone();
            let object = owned(format!("owned-{i}"));
            async move {
                api.create(&PostParams::default(), &object)
                    .await
                    .expect("created");
            }
        })
        .await;
    let created = started.elapsed();
    let patches = sizes.owned_objects.min(2_000);
    let started = Instant::now();
    futures::stream::iter(0..patches)
        .for_each_concurrent(8, |i| {
            let api = api.clone();
            async move {
                let patch = json!({"data": {"counter": i.to_string()}});
                api.patch(
                    &format!("owned-{}", (i * 31) % sizes.owned_objects),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .expect("patched");
            }
        })
        .await;
    let patched = started.elapsed();
    println!(
        "| creates of owned objects, up to {} owned by one | {:.0} creates/s |",
        sizes.owned_objects,
        sizes.owned_objects as f64 / created.as_secs_f64()
    );
    println!(
        "| merge PATCH among {} owned objects, 8 in flight | {:.0} patches/s |",
        sizes.owned_objects,
        patches as f64 / patched.as_secs_f64()
    );
}

async fn history_bound(server: &FakeApiServer, sizes: &Sizes) {
    let stats = server.stats();
    println!(
        "| watch history after {} changes (limit {}) | {} entries kept |",
        stats.resource_version, sizes.history_limit, stats.history
    );
    assert!(
        stats.history <= sizes.history_limit,
        "the history stays bounded"
    );
}

fn main() {
    let sizes = sizes();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let server = FakeApiServer::builder()
            .history_limit(sizes.history_limit)
            .start()
            .await
            .expect("the server starts");
        println!("| fake API server, loopback, 2 runtime threads | |");
        println!("|---|---|");
        patches_per_second(&server, &sizes).await;
        fan_out(&server, &sizes).await;
        history_bound(&server, &sizes).await;
        server.stop().await;
        for concurrency in [1, sizes.concurrency, 4 * sizes.concurrency] {
            for state_file in [false, true] {
                creates_per_second(&sizes, concurrency, state_file).await;
            }
        }
        let server = FakeApiServer::builder()
            .history_limit(sizes.history_limit)
            .start()
            .await
            .expect("the server starts");
        memory_per_object(&server, &sizes).await;
        server.stop().await;
        let server = FakeApiServer::start().await.expect("the server starts");
        owned_writes(&server, &sizes).await;
        server.stop().await;
    });
}
