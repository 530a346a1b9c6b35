//! How fast an operator dies: SIGTERM to exit of the `stoppable` example's operator, measured
//! from outside its process.
//!
//! Each run starts a fresh fake API server (on a runtime of its own) with the KopfExample CRD
//! and N objects spread over several namespaces, then the operator in a child process: this
//! very binary started again with [`CHILD`] set, running the example's own code
//! (`examples/stoppable.rs`, compiled in as a module), so it is always the current build. Once
//! every object is handled (idle) or every handler is running (in flight), it sends SIGTERM
//! and takes the time until the process has exited. It counts the connections open on the
//! server before the SIGTERM, when the exit is seen (the server notices closed connections a
//! little later), and a second after. Scenarios:
//!
//! - idle: every object handled, nothing running;
//! - async handlers in flight: one per object, each honouring its `stopped` token (each then
//!   writes its progress, so the stop includes N PATCHes);
//! - sync handlers in flight: as many as the operator's threads (`min(32, cpus + 4)`), each
//!   polling its `stopped` token; the other objects wait for a thread.
//!
//! `cargo run --release -p kopf-bench --bin shutdown-bench [-- --objects N --namespaces N
//! --runs N]`. Figures are for comparing runs on one machine; they are never asserted in tests.

#[path = "../../../examples/stoppable.rs"]
#[allow(
    dead_code,
    reason = "the example's `main` belongs to its binary; the child process calls `operate`"
)]
mod stoppable;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kopf_testing::{FakeApiServer, fixtures};
use serde_json::{Value, json};

/// Set in the environment of the child process: run the operator there.
const CHILD: &str = "KOPF_BENCH_SHUTDOWN_CHILD";

/// Longer than any scenario may take to get ready.
const DEADLINE: Duration = Duration::from_secs(120);

struct Sizes {
    objects: usize,
    namespaces: usize,
    runs: usize,
}

fn sizes() -> Sizes {
    let mut sizes = Sizes {
        objects: 1000,
        namespaces: 10,
        runs: 5,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).and_then(|v| v.parse().ok());
        let Some(value) = value.filter(|v| *v > 0) else {
            eprintln!("usage: shutdown-bench [--objects N] [--namespaces N] [--runs N]");
            std::process::exit(2);
        };
        match pair[0].as_str() {
            "--objects" => sizes.objects = value,
            "--namespaces" => sizes.namespaces = value,
            "--runs" => sizes.runs = value,
            other => {
                eprintln!("unknown option {other}");
                std::process::exit(2);
            }
        }
    }
    sizes
}

#[derive(Debug, Clone, Copy)]
enum Scenario {
    Idle,
    AsyncInFlight,
    SyncInFlight,
}

impl Scenario {
    fn describe(self, sizes: &Sizes) -> String {
        match self {
            Scenario::Idle => format!("idle, {} objects handled", sizes.objects),
            Scenario::AsyncInFlight => format!("{} async handlers in flight", sizes.objects),
            Scenario::SyncInFlight => format!(
                "{} sync handlers in flight ({} objects waiting for a thread)",
                threads().min(sizes.objects),
                sizes.objects.saturating_sub(threads())
            ),
        }
    }

    fn spec(self) -> Value {
        match self {
            Scenario::Idle => json!({"duration": 0}),
            Scenario::AsyncInFlight => json!({"duration": 3600}),
            Scenario::SyncInFlight => json!({"duration": 3600, "blocking": true}),
        }
    }
}

/// The operator's threads for sync handlers, as its default settings size them.
fn threads() -> usize {
    kopf::Settings::default().execution.workers()
}

/// What one run measured.
struct Measured {
    sigterm_to_exit: Duration,
    exit: ExitStatus,
    open_before: usize,
    open_at_exit: usize,
    open_after: usize,
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(stoppable::operate().into());
    }
    let sizes = sizes();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!(
            "| SIGTERM → exit, `stoppable` example in a child process, {} objects in {} namespaces, {} runs each | median | min | max | exit codes | open connections per run: before SIGTERM → at exit → 1 s later |",
            sizes.objects, sizes.namespaces, sizes.runs
        );
        println!("|---|---|---|---|---|---|");
        for scenario in [
            Scenario::Idle,
            Scenario::AsyncInFlight,
            Scenario::SyncInFlight,
        ] {
            let mut runs = Vec::new();
            for _ in 0..sizes.runs {
                runs.push(run(scenario, &sizes).await);
            }
            report(&scenario.describe(&sizes), &runs);
        }
    });
}

fn report(what: &str, runs: &[Measured]) {
    let mut times: Vec<Duration> = runs.iter().map(|r| r.sigterm_to_exit).collect();
    times.sort();
    let median = if times.len() % 2 == 1 {
        times[times.len() / 2]
    } else {
        (times[times.len() / 2 - 1] + times[times.len() / 2]) / 2
    };
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let mut codes: Vec<String> = runs
        .iter()
        .map(|r| match r.exit.code() {
            Some(code) => code.to_string(),
            None => format!("{:?}", r.exit),
        })
        .collect();
    codes.dedup();
    let counts = |count: fn(&Measured) -> usize| {
        let counts: Vec<String> = runs.iter().map(|r| count(r).to_string()).collect();
        counts.join("/")
    };
    println!(
        "| {what} | {} | {} | {} | {} | {} → {} → {} |",
        ms(median),
        ms(times[0]),
        ms(times[times.len() - 1]),
        codes.join(", "),
        counts(|r| r.open_before),
        counts(|r| r.open_at_exit),
        counts(|r| r.open_after),
    );
}

async fn run(scenario: Scenario, sizes: &Sizes) -> Measured {
    let server = server_with_objects(scenario, sizes).await;
    // The log line of each handler that starts (see `examples/stoppable.rs`).
    let (started, expected) = match scenario {
        Scenario::Idle => (" working seconds=", 0),
        Scenario::AsyncInFlight => (" working seconds=", sizes.objects),
        Scenario::SyncInFlight => (" working on a thread", threads().min(sizes.objects)),
    };
    let operator = OperatorProcess::start(&server, started);
    match scenario {
        Scenario::Idle => wait_handled(&server, sizes.objects, &operator).await,
        _ => operator.wait_started(expected),
    }
    let open_before = server.stats().open_connections;
    let (sigterm_to_exit, exit) = operator.terminate();
    let open_at_exit = server.stats().open_connections;
    let until = Instant::now() + Duration::from_secs(1);
    while server.stats().open_connections > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let open_after = server.stats().open_connections;
    server.stop().await;
    Measured {
        sigterm_to_exit,
        exit,
        open_before,
        open_at_exit,
        open_after,
    }
}

/// A server on a runtime of its own with the KopfExample CRD, the namespaces, and the objects.
async fn server_with_objects(scenario: Scenario, sizes: &Sizes) -> FakeApiServer {
    let server = FakeApiServer::builder()
        .start_on_own_runtime()
        .await
        .expect("the server starts");
    server.apply(fixtures::KOPFEXAMPLE_CRD).await;
    let client = server.test_client();
    for n in 0..sizes.namespaces {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}")}});
        client.apply_value(namespace).await;
    }
    let spec = scenario.spec();
    futures::stream::iter(0..sizes.objects)
        .for_each_concurrent(16, |i| {
            let (client, spec) = (client.clone(), spec.clone());
            let namespace = format!("ns-{}", i % sizes.namespaces);
            async move {
                let path = fixtures::kopfexamples_in(&namespace);
                let object = fixtures::kopfexample(&format!("example-{i}"), spec);
                let (status, created) = client.request("POST", &path, object).await;
                assert_eq!(status, 201, "{created}");
            }
        })
        .await;
    server
}

/// Waits until every object has the handler's result.
async fn wait_handled(server: &FakeApiServer, objects: usize, operator: &OperatorProcess) {
    let client = server.test_client();
    let until = Instant::now() + DEADLINE;
    loop {
        operator.assert_running();
        let (status, list) = client
            .request("GET", "/apis/kopf.dev/v1/kopfexamples", None)
            .await;
        assert_eq!(status, 200, "listed: {list}");
        let items = list["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let handled = items
            .iter()
            .filter(|o| !o["status"]["create_fn"].is_null())
            .count();
        if handled >= objects {
            return;
        }
        assert!(
            Instant::now() < until,
            "only {handled} of {objects} handled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The example's operator in a child process; its exit is noticed by a thread of its own.
struct OperatorProcess {
    pid: rustix::process::Pid,
    exited: mpsc::Receiver<(Instant, ExitStatus)>,
    started: Arc<AtomicUsize>,
    _kubeconfig: tempfile::TempPath,
}

impl OperatorProcess {
    /// Starts the operator; counts the lines of its log that contain `started`.
    fn start(server: &FakeApiServer, started: &str) -> OperatorProcess {
        let kubeconfig = tempfile::NamedTempFile::new()
            .expect("a temporary file")
            .into_temp_path();
        server
            .write_kubeconfig(&kubeconfig)
            .expect("the kubeconfig is written");
        let mut child: Child = Command::new(std::env::current_exe().expect("this binary's path"))
            .env(CHILD, "1")
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            // kube reads proxies from the environment; the fake server is local.
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the operator's process starts");
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a valid pid");
        let stderr = child.stderr.take().expect("a piped stderr");
        let (counted, needle) = (Arc::new(AtomicUsize::new(0)), started.to_string());
        let counter = counted.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains(&needle) {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let (sender, exited) = mpsc::channel();
        std::thread::spawn(move || {
            let status = child.wait().expect("the child's status");
            let _ = sender.send((Instant::now(), status));
        });
        OperatorProcess {
            pid,
            exited,
            started: counted,
            _kubeconfig: kubeconfig,
        }
    }

    fn assert_running(&self) {
        if let Ok((_, status)) = self.exited.try_recv() {
            panic!("the operator exited early: {status:?}");
        }
    }

    /// Waits until `count` handlers have started.
    fn wait_started(&self, count: usize) {
        let until = Instant::now() + DEADLINE;
        while self.started.load(Ordering::SeqCst) < count {
            self.assert_running();
            assert!(
                Instant::now() < until,
                "only {} of {count} handlers started",
                self.started.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGTERM; the time until the process has exited, and how it exited.
    fn terminate(self) -> (Duration, ExitStatus) {
        let sent = Instant::now();
        rustix::process::kill_process(self.pid, rustix::process::Signal::TERM)
            .expect("SIGTERM is sent");
        let (at, status) = self
            .exited
            .recv_timeout(DEADLINE)
            .expect("the operator exits");
        (at.saturating_duration_since(sent), status)
    }
}
