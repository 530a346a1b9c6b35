//! `kopf-fake-apiserver`: the fake Kubernetes API server as a process, for kubectl, operators
//! in other languages, and a development cluster that survives restarts and crashes
//! (`--state-file`). Plain HTTP by default; HTTPS with `--tls`, and always when clients are
//! to send tokens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kopf_fake_apiserver::FakeApiServer;

/// A fake Kubernetes API server in memory, for tests and local development.
///
/// It prints `listening on URL` (then any ServiceAccount tokens asked for) and serves until
/// SIGINT or SIGTERM. With --tls (implied by --token and --service-account, since kubectl
/// sends tokens only over TLS) it serves HTTPS with a CA made at start; the kubeconfig it
/// writes trusts that CA, and --ca-file writes the CA for other clients.
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// Write a kubeconfig for this server to this path (for kubectl: KUBECONFIG=PATH).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Serve HTTPS with a certificate for localhost, 127.0.0.1 and ::1, signed by a CA made
    /// at start (trusted by the kubeconfig written; see --ca-file).
    #[arg(long)]
    tls: bool,
    /// Write the CA certificate (PEM) to this path, for clients given a CA file
    /// (curl --cacert); implies --tls.
    #[arg(long, value_name = "PATH")]
    ca_file: Option<PathBuf>,
    /// Require this bearer token from clients (401 Unauthorized otherwise, on every path but
    /// /healthz, /livez, /readyz and /version, the /_fake/ control API included); implies
    /// --tls, as kubectl sends no token over plain HTTP.
    #[arg(long)]
    token: Option<String>,
    /// Keep the objects in this file: loaded at start, and every write saved (fsync'd) before
    /// it is answered, so that neither a restart nor a crash loses an answered write.
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
    /// and their bindings (403 Forbidden otherwise); the admin token keeps full access.
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
    /// Print a bearer token that acts as this ServiceAccount (repeatable), after the URL;
    /// implies --tls, as kubectl sends no token over plain HTTP.
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
    if args.tls || args.ca_file.is_some() || !args.service_account.is_empty() {
        builder = builder.tls();
    }
    if args.contract_breaking_faults {
        builder = builder.contract_breaking_faults();
    }
    if let Some(token) = args.token {
        builder = builder.token(token);
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
    if let (Some(path), Some(ca)) = (&args.ca_file, server.ca_pem())
        && let Err(error) = std::fs::write(path, ca)
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
