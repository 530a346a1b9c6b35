//! `kopf-fake-apiserver`: the fake Kubernetes API server as a process, for kubectl, operators
//! in other languages, and a development cluster that survives restarts and crashes
//! (`--state-file`). HTTPS with an admin token by default, as a real cluster; plain HTTP
//! without credentials only when asked (`--insecure-http`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kopf_fake_apiserver::FakeApiServer;

/// A fake Kubernetes API server in memory, for tests and local development.
///
/// It prints `listening on URL` (then any ServiceAccount tokens asked for) and serves until
/// SIGINT or SIGTERM. As a real cluster, it serves HTTPS only, with a CA made at start, and
/// requires credentials: the admin's token (--token, or one made at start). The kubeconfig it
/// writes (--kubeconfig) trusts that CA and carries that token; --ca-file writes the CA for
/// other clients. A request without credentials is system:anonymous, who may read /healthz,
/// /livez, /readyz and /version only. With --insecure-http it serves plain HTTP instead, where
/// kubectl sends no credentials, and every request acts as the admin.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Write a kubeconfig for this server to this path (for kubectl: KUBECONFIG=PATH), readable
    /// by its owner only: it trusts the server's CA and carries the admin's token.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Serve HTTPS (the default; kept for the scripts that ask for it).
    #[arg(long, conflicts_with = "insecure_http")]
    #[allow(
        dead_code,
        reason = "accepted for scripts written when plain HTTP was the default; HTTPS is now"
    )]
    tls: bool,
    /// Serve plain HTTP, with no credentials required: every request acts as the admin, as on
    /// kube-apiserver's old insecure port. For clients that cannot do TLS, and for measurements
    /// that leave TLS out.
    #[arg(long, conflicts_with_all = ["ca_file", "token", "enforce_rbac"])]
    insecure_http: bool,
    /// Write the CA certificate (PEM) to this path, for clients given a CA file
    /// (curl --cacert), readable by its owner only.
    #[arg(long, value_name = "PATH")]
    ca_file: Option<PathBuf>,
    /// The admin's bearer token (one is made at start otherwise); requests with another token
    /// are 401 Unauthorized, on every path.
    #[arg(long)]
    token: Option<String>,
    /// Keep the objects in this file (readable by its owner only): loaded at start, and every
    /// write saved (fsync'd) before it is answered, so that neither a restart nor a crash loses
    /// an answered write.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// How many changes the watch history keeps for replay.
    #[arg(long, default_value_t = 10_000)]
    history_limit: usize,
    /// Seconds between bookmarks on watches that allow them.
    #[arg(long, default_value_t = 30)]
    bookmark_interval: u64,
    /// Allow faults that break guarantees real API servers give (break_stream: events
    /// dropped, duplicated or reordered within one watch stream).
    #[arg(long)]
    contract_breaking_faults: bool,
    /// Ignore the shardSelector parameter of lists and watches, as servers without the
    /// ShardedListAndWatch feature gate (Kubernetes 1.36, alpha, off by default) do; by
    /// default it is honoured and lists carry metadata.shardInfo.
    #[arg(long)]
    no_sharded_watches: bool,
    /// Check the requests of ServiceAccounts' tokens against the stored Roles, ClusterRoles
    /// and their bindings (403 Forbidden otherwise); the admin's token keeps full access.
    #[arg(long)]
    enforce_rbac: bool,
    /// Seconds a client has for its TLS handshake and each request's headers (an idle
    /// keep-alive connection is closed after as long).
    #[arg(long, value_name = "SECONDS", default_value_t = 32)]
    header_timeout: u64,
    /// Seconds a client has to send a request's body once its headers came (then 408).
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    body_timeout: u64,
    /// The most connections kept open; beyond it, the one that waited longest for a request
    /// is closed (or the new one, when all are busy, e.g. with watches).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_connections: usize,
    /// Print a bearer token that acts as this ServiceAccount (repeatable), after the URL: a
    /// signed token valid for a year, or until the account is deleted or the server stops. The
    /// account (and its namespace) is created if missing.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    service_account: Vec<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut builder = FakeApiServer::builder()
        .bind(args.bind)
        .history_limit(args.history_limit)
        .bookmark_interval(Duration::from_secs(args.bookmark_interval))
        .sharded_watches(!args.no_sharded_watches)
        .header_timeout(Duration::from_secs(args.header_timeout))
        .body_timeout(Duration::from_secs(args.body_timeout))
        .max_connections(args.max_connections);
    if !args.insecure_http {
        // A real cluster requires credentials: the token given, or one nobody can guess.
        let token = args.token.clone().unwrap_or_else(random_token);
        builder = builder.tls().token(token);
        if args.kubeconfig.is_none() && args.token.is_none() {
            eprintln!(
                "kopf-fake-apiserver: the admin's token is made at start and written only to \
                 the kubeconfig: pass --kubeconfig PATH (or --token TOKEN) to reach more than \
                 /healthz and /version"
            );
        }
    }
    if args.contract_breaking_faults {
        builder = builder.contract_breaking_faults();
    }
    if let Some(path) = args.state_file {
        builder = builder.state_file(path);
    }
    if args.enforce_rbac {
        builder = builder.enforce_rbac();
    }
    let mut accounts = Vec::new();
    for account in &args.service_account {
        match account.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                accounts.push((namespace, name));
            }
            _ => {
                eprintln!(
                    "kopf-fake-apiserver: --service-account takes NAMESPACE/NAME, not {account:?}"
                );
                return std::process::ExitCode::from(2);
            }
        }
    }
    let server = match builder.start().await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("kopf-fake-apiserver: cannot start: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.kubeconfig
        && let Err(error) = server.write_kubeconfig(path)
    {
        eprintln!(
            "kopf-fake-apiserver: cannot write the kubeconfig to {}: {error}",
            path.display()
        );
        server.stop().await;
        return std::process::ExitCode::FAILURE;
    }
    if let Some(path) = &args.ca_file
        && let Err(error) = server.write_ca_file(path)
    {
        eprintln!(
            "kopf-fake-apiserver: cannot write the CA certificate to {}: {error}",
            path.display()
        );
        server.stop().await;
        return std::process::ExitCode::FAILURE;
    }
    println!("listening on {}", server.url());
    for (namespace, name) in accounts {
        let token = server.service_account_token(namespace, name);
        println!("token of serviceaccount {namespace}/{name}: {token}");
    }
    wait_for_signal().await;
    server.stop().await;
    std::process::ExitCode::SUCCESS
}

/// A token nobody can guess: 128 random bits, in hex.
fn random_token() -> String {
    use rand::Rng as _;
    let bits: u128 = rand::rng().random();
    format!("{bits:032x}")
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
