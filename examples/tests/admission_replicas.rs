//! Two replicas of the `admission` gallery example as processes against the fake API server,
//! which calls their webhooks over HTTPS as kube-apiserver does, with their failure policies.
//! Exactly one replica writes the webhook configurations (the active peer with Kopf's
//! peering; the holder of the configurations' Lease with assigned shards, where no replica
//! pauses); the other serves its webhooks too and never writes them.
//!
//! Each scenario stops one replica, the writer or the other, with a SIGTERM or a SIGKILL, in
//! both start orders (for shards: one after the other, or both at once), and meanwhile keeps creating objects: an invalid one must be refused
//! every time (by the handler, or by the failure policy while the webhooks point at a replica
//! gone), and a valid one must be admitted, mutated, within seconds. A SIGTERM of the writer
//! hands the configurations over (they never shrink); a SIGKILL is repaired by the other
//! replica once the writer's Lease (3 s) or peering entry (4 s) has expired. The last
//! replica's SIGTERM shrinks them to the persistent webhooks. Some scenarios run with a slow
//! API server (the writes of the configurations take a second).
//!
//! With assigned shards, the replicas share their certificate through a Secret (made by the
//! first, read by the second). Each replica is this very test binary, started again with
//! [`CHILD`] set (see `stoppable.rs` for why not the example's binary). The scenarios print
//! how long each took to admit a valid object again (`-- --nocapture`); they assert only
//! what happened, never how fast.

#![cfg(unix)]

mod support;

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use kopf::Settings;
use kopf::admission::WebhookServer;
use kopf::operator::Operator;
use kopf::settings::ShardingSettings;
use kopf_examples::gallery::admission;
use kopf_testing::{FakeApiServer, Fault, test_settings, wait};
use serde_json::{Value, json};
use support::{OperatorProcess, spawn_against};

/// Set in the environment of the child process: run a replica there.
const CHILD: &str = "KOPF_EXAMPLES_ADMISSION_REPLICAS_CHILD";
/// How the replicas share the work: `sharded`, or `peering` with [`PRIORITY`].
const MODE: &str = "KOPF_EXAMPLES_ADMISSION_REPLICAS_MODE";
const PRIORITY: &str = "KOPF_EXAMPLES_ADMISSION_REPLICAS_PRIORITY";
/// How long a replica's peering entry lives, in seconds.
const LIFETIME: u64 = 4;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const COLLECTION: &str = "/apis/kopf.dev/v1/namespaces/default/kopfexamples";
const VALIDATING: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/auto.kopf.dev";
const MUTATING: &str =
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/auto.kopf.dev";
const MUTATINGS: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";
const VALIDATINGS: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";

/// One scenario at a time: each runs two operators and an API server on shared cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Not a scenario: a replica's process. Started by the scenarios (with [`CHILD`] set) to run
/// the example's handlers and exit with the operator's exit code; a no-op otherwise.
#[test]
fn operator_process() {
    if std::env::var_os(CHILD).is_some() {
        std::process::exit(replica());
    }
}

/// Serves the webhooks on 127.0.0.1 (a free port) and keeps their configurations, as the
/// example's own `configure` does; sharded replicas share their certificate in a Secret.
#[kopf::on_startup]
async fn configure(settings: &mut Settings) {
    let mut server = WebhookServer::new().addr(Ipv4Addr::LOCALHOST.into());
    if settings.peering.sharding.is_some() {
        server = server.secret("default", "admission-example-tls");
    }
    settings.admission.server = Some(server);
    settings.admission.managed = Some(admission::MANAGED.into());
}

/// The replica: the example's admission handlers (with the startup handler above), and
/// assigned shards (4, Lease timings 3 s / 2 s / 0.5 s) or peering with the scenario's
/// priority.
fn replica() -> i32 {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let identity = std::env::var("POD_ID").expect("the replica's POD_ID");
    let mut settings = test_settings();
    match std::env::var(MODE).as_deref() {
        Ok("sharded") => {
            let mut sharding = ShardingSettings::new(4);
            sharding.identity = Some(identity);
            sharding.lease_duration = Duration::from_secs(3);
            sharding.renew_deadline = Duration::from_secs(2);
            sharding.retry_period = Duration::from_millis(500);
            settings.peering.sharding = Some(sharding);
            settings.peering.standalone = true;
        }
        _ => {
            settings.peering.priority = std::env::var(PRIORITY)
                .expect("the replica's priority")
                .parse()
                .expect("an integer priority");
            settings.peering.lifetime = Duration::from_secs(LIFETIME);
        }
    }
    let registry = kopf::handlers![
        configure,
        admission::say_hello,
        admission::check_numbers,
        admission::keep_protected,
        admission::note_deletions,
        admission::default_numbers,
        admission::convert_numbers,
    ];
    let operator = Operator::new(registry).settings(settings);
    match runtime.block_on(operator.run_until_signalled()) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("the replica failed: {error}");
            1
        }
    }
}

/// How the replicas share the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Assigned shards: no replica pauses; the configurations' Lease elects the writer.
    Sharded,
    /// Kopf's peering, priorities 100 and 50: the lower one pauses.
    Peering,
}

/// Which replica a scenario stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// The one that writes the configurations.
    Writer,
    /// The other one.
    Other,
}

/// A replica: its process and the port its webhooks are served at.
struct Replica {
    name: &'static str,
    process: OperatorProcess,
    port: u16,
}

/// Starts a replica; see [`serving`].
fn spawn(server: &FakeApiServer, mode: Mode, name: &'static str, priority: i64) -> OperatorProcess {
    let args = ["operator_process", "--exact", "--nocapture", "--quiet"];
    spawn_against(server, CHILD, &args, |command| {
        command
            .env("POD_ID", name)
            .env(PRIORITY, priority.to_string())
            .env(
                MODE,
                match mode {
                    Mode::Sharded => "sharded",
                    Mode::Peering => "peering",
                },
            )
            .env("RUST_LOG", "info");
    })
}

/// Waits until a replica serves its webhooks; it, with its port.
async fn serving(name: &'static str, mut process: OperatorProcess) -> Replica {
    process
        .wait_for_log("serving admission webhooks at https://127.0.0.1:")
        .await;
    let log = process.log();
    let port = log
        .split("serving admission webhooks at https://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in the log:\n{log}"));
    Replica {
        name,
        process,
        port,
    }
}

/// A server with the KopfExample CRD (and, for peering, Kopf's peering CRDs and the
/// cluster-wide peering object), keeping a journal of every change.
async fn server(mode: Mode) -> FakeApiServer {
    let server = kopf_testing::ApiServer::from_env()
        .start(FakeApiServer::builder().journal())
        .await;
    let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("crd.yaml");
    let crd: Value =
        serde_norway::from_str(&std::fs::read_to_string(crd).expect("crd.yaml")).expect("YAML");
    post(&server, CRDS, crd).await;
    if mode == Mode::Peering {
        for crd in kopf::peering::peering_crds() {
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            post(&server, CRDS, crd).await;
            server.test_client().wait_for_crd(&name).await;
        }
        let peering = json!({"apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
                             "metadata": {"name": "default"}});
        wait("the peering object to be created", || async {
            let created = post(
                &server,
                "/apis/kopf.dev/v1/clusterkopfpeerings",
                peering.clone(),
            )
            .await;
            (created["kind"] == "ClusterKopfPeering").then_some(())
        })
        .await;
    }
    // The CRD is served once it is established (and discovery serves it).
    server
        .test_client()
        .wait_for_crd("kopfexamples.kopf.dev")
        .await;
    wait("the KopfExample CRD to be served", || async {
        let listed = get(&server, COLLECTION).await;
        (listed["kind"] == "KopfExampleList").then_some(())
    })
    .await;
    server
}

/// The ports the configuration's webhooks point at.
fn ports(configuration: &Value) -> Vec<u16> {
    configuration["webhooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|webhook| webhook["clientConfig"]["url"].as_str())
        .filter_map(|url| url.parse::<http::Uri>().ok()?.port_u16())
        .collect()
}

fn names(configuration: &Value) -> Vec<String> {
    configuration["webhooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|webhook| webhook["name"].as_str().map(String::from))
        .collect()
}

/// Waits until both configurations point at this port only, with every webhook.
async fn configured_at(server: &FakeApiServer, port: u16) {
    wait(
        &format!("the configurations to point at {port}"),
        || async {
            let validating = get(server, VALIDATING).await;
            let mutating = get(server, MUTATING).await;
            let at = |c: &Value, count: usize| {
                ports(c).len() == count && ports(c).iter().all(|p| *p == port)
            };
            (at(&validating, 4) && at(&mutating, 2)).then_some(())
        },
    )
    .await;
}

/// What happened to one creation.
#[derive(Debug)]
enum Created {
    /// Stored, with these `spec.numbers`.
    Admitted(Value),
    /// Refused, with this message.
    Refused(String),
}

async fn create(server: &FakeApiServer, name: &str, numbers: Value) -> Created {
    let object = json!({"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
                        "metadata": {"name": name}, "spec": {"numbers": numbers}});
    let request = http::Request::post(COLLECTION)
        .header("content-type", "application/json")
        .body(object.to_string().into_bytes())
        .unwrap();
    match server.client().request::<Value>(request).await {
        Ok(created) => Created::Admitted(created["spec"]["numbers"].clone()),
        Err(kube::Error::Api(status)) => Created::Refused(status.message),
        Err(error) => panic!("creating {name}: {error}"),
    }
}

/// One scenario: two replicas started in this order (`true`: the writer-to-be first), one of
/// them stopped with `signal`; objects created all along.
async fn scenario(mode: Mode, writer_first: bool, victim: Victim, signal: &str, slow: bool) {
    let _serial = SERIAL.lock().await;
    let server = server(mode).await;
    let (mut writer, mut other) = match (mode, writer_first) {
        // The first one takes the configurations' Lease.
        (Mode::Sharded, true) => {
            let first = serving("r1", spawn(&server, mode, "r1", 0)).await;
            configured_at(&server, first.port).await;
            let second = serving("r2", spawn(&server, mode, "r2", 0)).await;
            (first, second)
        }
        // Both at once: whichever takes the Lease writes.
        (Mode::Sharded, false) => {
            let (one, two) = (spawn(&server, mode, "r1", 0), spawn(&server, mode, "r2", 0));
            let (one, two) = (serving("r1", one).await, serving("r2", two).await);
            let port = wait("the configurations to be written", || async {
                let validating = get(&server, VALIDATING).await;
                ports(&validating).first().copied()
            })
            .await;
            configured_at(&server, port).await;
            if port == one.port {
                (one, two)
            } else {
                (two, one)
            }
        }
        // The higher priority writes, whatever the start order; the lower one pauses.
        (Mode::Peering, true) => {
            let high = serving("high", spawn(&server, mode, "high", 100)).await;
            configured_at(&server, high.port).await;
            let low = serving("low", spawn(&server, mode, "low", 50)).await;
            (high, low)
        }
        (Mode::Peering, false) => {
            let low = serving("low", spawn(&server, mode, "low", 50)).await;
            configured_at(&server, low.port).await;
            let high = serving("high", spawn(&server, mode, "high", 100)).await;
            (high, low)
        }
    };
    match mode {
        Mode::Peering => {
            other
                .process
                .wait_for_log("Pausing operations in favour of")
                .await;
            configured_at(&server, writer.port).await;
        }
        Mode::Sharded => {
            writer.process.wait_for_log("joined the ring").await;
            other.process.wait_for_log("joined the ring").await;
        }
    }
    let settled = server.journal().len();
    // Both serve; only the writer's server is in the configurations.
    assert_admits_and_refuses(&server, "before").await;
    for change in &server.journal()[settled..] {
        if change.resource == VALIDATINGS || change.resource == MUTATINGS {
            assert!(
                !ports(&change.object).contains(&other.port),
                "{} wrote the configurations: {:#}",
                other.name,
                change.object
            );
        }
    }
    if slow {
        for resource in [VALIDATINGS, MUTATINGS] {
            server.inject(
                Fault::delay(Duration::from_secs(1))
                    .verb("patch")
                    .resource(resource),
            );
        }
    }

    let (mut victim, mut survivor) = match victim {
        Victim::Writer => (writer, other),
        Victim::Other => (other, writer),
    };
    let before = server.journal().len();
    victim.process.signal(signal);
    let signalled = Instant::now();
    let mut admitted_after: Option<Duration> = None;
    let mut probes_after = 0;
    let mut counter = 0;
    loop {
        counter += 1;
        match create(&server, &format!("invalid-{counter}"), json!("seven")).await {
            Created::Admitted(numbers) => panic!(
                "an invalid object was admitted {:?} after the {signal} of {}: {numbers}\n{}:\n{}\n{}:\n{}",
                signalled.elapsed(),
                victim.name,
                victim.name,
                victim.process.log(),
                survivor.name,
                survivor.process.log()
            ),
            Created::Refused(_) => {}
        }
        match create(&server, &format!("valid-{counter}"), json!([1, "2"])).await {
            Created::Admitted(numbers) => {
                assert_eq!(numbers, json!([1, 2]), "mutated");
                admitted_after.get_or_insert(signalled.elapsed());
            }
            Created::Refused(message) => {
                assert!(
                    message.contains("failed calling webhook"),
                    "a valid object refused for another reason than a webhook away: {message}"
                );
            }
        }
        let exited = !victim.process.is_running();
        if exited && admitted_after.is_some() {
            probes_after += 1;
            if probes_after >= 5 {
                break;
            }
        }
        assert!(
            signalled.elapsed() < kopf_testing::DEADLINE,
            "no valid object admitted (or {} still running) {:?} after the {signal}:\n{}:\n{}\n{}:\n{}",
            victim.name,
            kopf_testing::DEADLINE,
            victim.name,
            victim.process.log(),
            survivor.name,
            survivor.process.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if signal == "TERM" {
        assert_eq!(
            victim.process.exit_code().await,
            0,
            "{}",
            victim.process.log()
        );
    }
    server.clear_faults();
    println!(
        "{mode:?} ({}), {signal} of {}: a valid object admitted again {:?} after the signal",
        if writer_first {
            "the writer started first"
        } else {
            "the other order"
        },
        victim.name,
        admitted_after.unwrap_or_default(),
    );
    configured_at(&server, survivor.port).await;
    if signal == "TERM" {
        for change in &server.journal()[before..] {
            if change.resource == MUTATINGS {
                assert_eq!(
                    names(&change.object).len(),
                    2,
                    "never shrunk while a replica serves: {:#}",
                    change.object
                );
            }
        }
    }

    // The last replica's stop shrinks them to the persistent webhooks.
    survivor.process.signal("TERM");
    assert_eq!(
        survivor.process.exit_code().await,
        0,
        "{}",
        survivor.process.log()
    );
    let validating = get(&server, VALIDATING).await;
    assert_eq!(
        names(&validating),
        [
            "keep-protected.auto.kopf.dev",
            "note-deletions.auto.kopf.dev"
        ]
    );
    assert_eq!(names(&get(&server, MUTATING).await), Vec::<String>::new());
    server.stop().await;
}

/// While the configurations point at a live replica: an invalid object is refused by the
/// handler, a valid one admitted and mutated.
async fn assert_admits_and_refuses(server: &FakeApiServer, tag: &str) {
    match create(server, &format!("{tag}-invalid"), json!("seven")).await {
        Created::Refused(message) => assert!(
            message.contains("spec.numbers must be a list if present."),
            "{message}"
        ),
        Created::Admitted(numbers) => panic!("admitted: {numbers}"),
    }
    match create(server, &format!("{tag}-valid"), json!([1, "2"])).await {
        Created::Admitted(numbers) => assert_eq!(numbers, json!([1, 2])),
        Created::Refused(message) => panic!("refused: {message}"),
    }
}

async fn get(server: &FakeApiServer, path: &str) -> Value {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    match server.client().request::<Value>(request).await {
        Ok(object) => object,
        Err(kube::Error::Api(status)) => json!({"status": status.code}),
        Err(error) => panic!("GET {path}: {error}"),
    }
}

async fn post(server: &FakeApiServer, path: &str, body: Value) -> Value {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap();
    match server.client().request::<Value>(request).await {
        Ok(created) => created,
        Err(kube::Error::Api(status)) => json!({"status": status.code}),
        Err(error) => panic!("POST {path}: {error}"),
    }
}

macro_rules! scenarios {
    ($($name:ident: $mode:ident, $writer_first:expr, $victim:ident, $signal:literal, $slow:expr;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                scenario(Mode::$mode, $writer_first, Victim::$victim, $signal, $slow).await;
            }
        )*
    };
}

scenarios! {
    sharded_sigterm_of_the_writer_hands_over: Sharded, true, Writer, "TERM", false;
    sharded_sigterm_of_the_writer_on_a_slow_api_hands_over: Sharded, true, Writer, "TERM", true;
    sharded_sigkill_of_the_writer_is_repaired: Sharded, true, Writer, "KILL", false;
    sharded_sigterm_of_the_other_changes_nothing: Sharded, true, Other, "TERM", false;
    sharded_sigkill_of_the_other_changes_nothing: Sharded, true, Other, "KILL", false;
    sharded_started_together_sigterm_of_the_writer_hands_over: Sharded, false, Writer, "TERM", false;
    sharded_started_together_sigkill_of_the_writer_is_repaired: Sharded, false, Writer, "KILL", false;
    sharded_started_together_sigterm_of_the_other_changes_nothing: Sharded, false, Other, "TERM", false;
    sharded_started_together_sigkill_of_the_other_changes_nothing: Sharded, false, Other, "KILL", false;
    peering_sigterm_of_the_active_hands_over: Peering, true, Writer, "TERM", false;
    peering_sigterm_of_the_active_on_a_slow_api_hands_over: Peering, true, Writer, "TERM", true;
    peering_sigkill_of_the_active_is_repaired: Peering, true, Writer, "KILL", false;
    peering_sigterm_of_the_paused_changes_nothing: Peering, true, Other, "TERM", false;
    peering_sigkill_of_the_paused_changes_nothing: Peering, true, Other, "KILL", false;
    peering_started_low_first_sigterm_of_the_active_hands_over: Peering, false, Writer, "TERM", false;
    peering_started_low_first_sigkill_of_the_active_is_repaired: Peering, false, Writer, "KILL", false;
    peering_started_low_first_sigterm_of_the_paused_changes_nothing: Peering, false, Other, "TERM", false;
    peering_started_low_first_sigkill_of_the_paused_changes_nothing: Peering, false, Other, "KILL", false;
}
