//! The command line as clap parses it: the subcommands (`run`, `crd`, `rbac`, `freeze`,
//! `resume`), their options in the order of Kopf's, and their help texts.

use std::ffi::OsString;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::configs::webhooks::WebhookServer;
use crate::kits::logging::LogFormat;

/// The command line: `run` is the default subcommand, so its options are also accepted here.
#[derive(Debug, Parser)]
#[command(
    name = "operator",
    about = "A Kubernetes operator built with kopf-rs.",
    version = concat!("(kopf-rs ", env!("CARGO_PKG_VERSION"), ")"),
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    after_help = ENVIRONMENT
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    #[command(flatten)]
    pub(super) run: RunArgs,
}

impl Cli {
    /// The options of `run` (the default subcommand); `None` for the other subcommands.
    #[cfg(test)]
    pub(super) fn args(self) -> RunArgs {
        match self.command {
            Some(Command::Run(args)) => args,
            None => self.run,
            Some(Command::Crd | Command::Rbac(_) | Command::Freeze(_) | Command::Resume(_)) => {
                panic!("not a run")
            }
        }
    }
}

pub(super) const ENVIRONMENT: &str = "\
Environment variables (as Kopf's CLI; the command line wins):
  KOPF_RUN_NAMESPACES      namespace patterns, space-separated (as -n)
  KOPF_RUN_NAMESPACE       one more namespace pattern (Kopf's legacy variable)
  KOPF_RUN_CLUSTERWIDE     serve all namespaces (as -A): 1/true/yes/on or 0/false/no/off
  KOPF_RUN_VERBOSE, KOPF_RUN_DEBUG, KOPF_RUN_QUIET
                           as -v, -d, -q
  KOPF_RUN_LOG_FORMAT      as --log-format
  KOPF_RUN_LOG_REFKEY      as --log-refkey
  KOPF_RUN_LOG_PREFIX      as --log-prefix (1/true/yes/on) or --no-log-prefix (0/false/no/off)
  KOPF_RUN_STANDALONE, KOPF_RUN_DEV
                           as --standalone, --dev: 1/true/yes/on or 0/false/no/off
  KOPF_RUN_LIVENESS        as -L
  KOPF_RUN_PEERING         as -P
  KOPF_RUN_PRIORITY        as -p
  KOPF_RUN_METRICS         as --metrics
  KOPF_RUN_LEASE           as --lease
  KOPF_RUN_SHARDS          as --shards
  KOPF_RUN_WEBHOOK_SERVER, KOPF_RUN_WEBHOOK_HOST, KOPF_RUN_WEBHOOK_SECRET,
  KOPF_RUN_ADMISSION_MANAGED
                           as --webhook-server, --webhook-host, --webhook-secret,
                           --admission-managed
  RUST_LOG                 a tracing filter, used when none of -v, -d, -q is given
  KUBECONFIG               the kubeconfig files (else ~/.kube/config, else in-cluster)";

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Start the operator and handle the objects until SIGINT or SIGTERM (the default).
    #[command(after_help = ENVIRONMENT)]
    Run(RunArgs),
    /// Print the CRDs of the typed custom resources and Kopf's peering CRDs, as YAML.
    ///
    /// The CRDs are those that the program declares with `Registry::crd::<K>()`, then
    /// ClusterKopfPeering and KopfPeering (kopf.dev/v1), which peering needs.
    Crd,
    /// Print the RBAC that the framework and the declared handlers need, as YAML.
    ///
    /// A ServiceAccount, a ClusterRole (and a Role per namespace when -n gives plain names)
    /// and their bindings.
    #[command(after_help = RBAC_NOTE)]
    Rbac(RbacArgs),
    /// Pause the operators of a peering object for a while (Kopf's `kopf freeze`).
    ///
    /// Writes an entry of a high priority to the peering object, so that the operators of
    /// lower priorities (Python Kopf's too) pause until it expires or `resume` removes it.
    #[command(after_help = FREEZE_ENVIRONMENT)]
    Freeze(FreezeArgs),
    /// End a freeze at once (Kopf's `kopf resume`).
    ///
    /// Removes the entry from the peering object, so that the paused operators resume.
    #[command(after_help = RESUME_ENVIRONMENT)]
    Resume(ResumeArgs),
}

/// Which peering objects `freeze` and `resume` write to, and as whom.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(super) struct PeeringTarget {
    #[command(flatten)]
    pub(super) log: LogArgs,
    /// The identity of the entry [default: POD_ID, else USER@HOST, as Kopf's].
    #[arg(short = 'i', long = "id", value_name = "ID")]
    pub(super) id: Option<String>,
    /// The KopfPeering in each of these namespaces (patterns as for `run`) rather than the
    /// ClusterKopfPeering.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    pub(super) namespaces: Vec<String>,
    /// The ClusterKopfPeering (the default).
    #[arg(short = 'A', long = "all-namespaces")]
    pub(super) all_namespaces: bool,
    /// The peering object's name [env: KOPF_FREEZE_PEERING or KOPF_RESUME_PEERING].
    #[arg(short = 'P', long, value_name = "NAME")]
    pub(super) peering: Option<String>,
}

/// The options of `freeze`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(super) struct FreezeArgs {
    #[command(flatten)]
    pub(super) target: PeeringTarget,
    /// A message (accepted as Kopf's command line accepts it; not written anywhere).
    #[arg(short = 'm', long, value_name = "TEXT")]
    pub(super) message: Option<String>,
    /// How long the freeze lasts, in seconds: then the paused operators resume (required).
    #[arg(short = 't', long, value_name = "SECONDS")]
    pub(super) lifetime: Option<u64>,
    /// The entry's priority: operators of lower priorities pause [default: 100].
    #[arg(short = 'p', long, value_name = "N", allow_negative_numbers = true)]
    pub(super) priority: Option<i64>,
    /// Development mode: priority 666, whatever -p says (as Kopf).
    #[arg(long)]
    pub(super) dev: bool,
}

/// The options of `resume`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(super) struct ResumeArgs {
    #[command(flatten)]
    pub(super) target: PeeringTarget,
}

pub(super) const FREEZE_ENVIRONMENT: &str = "\
Environment variables (as Kopf's CLI; the command line wins): KOPF_FREEZE_PEERING,
KOPF_FREEZE_LIFETIME, KOPF_FREEZE_PRIORITY, KOPF_FREEZE_DEV, KOPF_FREEZE_ID,
KOPF_FREEZE_MESSAGE, KOPF_FREEZE_NAMESPACES (space-separated), KOPF_FREEZE_CLUSTERWIDE,
KOPF_FREEZE_VERBOSE, KOPF_FREEZE_DEBUG, KOPF_FREEZE_QUIET, KOPF_FREEZE_LOG_FORMAT,
KOPF_FREEZE_LOG_REFKEY, KOPF_FREEZE_LOG_PREFIX.";

pub(super) const RESUME_ENVIRONMENT: &str = "\
Environment variables (as Kopf's CLI; the command line wins): KOPF_RESUME_PEERING,
KOPF_RESUME_ID, KOPF_RESUME_NAMESPACES (space-separated), KOPF_RESUME_CLUSTERWIDE,
KOPF_RESUME_VERBOSE, KOPF_RESUME_DEBUG, KOPF_RESUME_QUIET, KOPF_RESUME_LOG_FORMAT,
KOPF_RESUME_LOG_REFKEY, KOPF_RESUME_LOG_PREFIX.";

/// The priority of `freeze` (Kopf's).
pub(super) const FREEZE_PRIORITY: i64 = 100;

pub(super) const RBAC_NOTE: &str = "\
The RBAC is computed from the handlers, without a cluster: what the framework does with the
handled resources, events, CRDs and peering, and what the program declares (`owns = [..]`
and `reads = [..]` on handlers, `Registry::rbac_rule`). Other calls that handlers make with
their `client` are not covered: the output names the handlers that take a `client` and
declare nothing. Resources given by a name that discovery resolves (a short name, a kind, no
group) are printed as given: check them.";

/// The options of `rbac`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(super) struct RbacArgs {
    /// The namespace patterns the operator will serve, as for `run`: plain names get Roles,
    /// globs and negations a ClusterRole (with the right to list namespaces).
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    pub(super) namespaces: Vec<String>,
    /// The operator will serve all namespaces: a ClusterRole.
    #[arg(short = 'A', long = "all-namespaces")]
    pub(super) all_namespaces: bool,
    /// The ServiceAccount the roles are bound to, also the roles' name.
    #[arg(long, value_name = "NAME", default_value = "kopf-operator")]
    pub(super) service_account: String,
    /// The ServiceAccount's namespace.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    pub(super) service_account_namespace: String,
    /// Do not print the ServiceAccount itself, only the roles and bindings.
    #[arg(long)]
    pub(super) no_service_account: bool,
    /// The Lease that `run --lease` elects a leader with: a Role in its namespace (without
    /// one, the ServiceAccount's, which is the pod's) to get, create and update it; no rights
    /// on Kopf's peering objects (`run --lease` implies --standalone).
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = LeaseName::parse)]
    pub(super) lease: Option<LeaseName>,
    /// The operator runs with assigned shards (`run --shards N`; N is accepted and not
    /// needed): a Role in the ServiceAccount's namespace (the pod's, where the operator keeps
    /// the shards' Leases) to get, list, watch, create, update and delete Leases.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub(super) shards: Option<u32>,
    /// The name of the managed webhook configurations (`settings.admission.managed`, e.g.
    /// auto.kopf.dev): the ClusterRole creates validating and mutating webhook
    /// configurations and patches those of this name.
    #[arg(long, value_name = "NAME")]
    pub(super) admission_managed: Option<String>,
    /// The Secret that keeps the webhook certificate (`run --webhook-secret`): a Role in its
    /// namespace (without one, the ServiceAccount's) to create Secrets, and to get and update
    /// that one.
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = secret_name)]
    pub(super) webhook_secret: Option<LeaseName>,
}

/// The logging options of every subcommand (Kopf's `logging_options`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub(super) struct LogArgs {
    /// Log at DEBUG, without the internals of the HTTP and Kubernetes client libraries.
    #[arg(short, long)]
    pub(super) verbose: bool,
    /// Log at DEBUG, everything.
    #[arg(short, long)]
    pub(super) debug: bool,
    /// Log warnings and errors only.
    #[arg(short, long)]
    pub(super) quiet: bool,
    /// How log lines look [default: full]: the message with its object (plain), with time,
    /// target and level too (full), or one JSON object per line (json).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub(super) log_format: Option<LogFormat>,
    /// In JSON log lines, the key of the object a line is about [default: object].
    #[arg(long, value_name = "KEY")]
    pub(super) log_refkey: Option<String>,
    /// Prefix messages with the object they are about, `[namespace/name]` [default: on,
    /// except in JSON lines].
    #[arg(long, overrides_with = "no_log_prefix")]
    pub(super) log_prefix: bool,
    /// Do not prefix messages with the object they are about.
    #[arg(long, overrides_with = "log_prefix")]
    pub(super) no_log_prefix: bool,
}

/// The options of `run`, in the order of Kopf's `kopf run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    pub(super) log: LogArgs,
    /// Serve all namespaces and the cluster-scoped resources.
    #[arg(short = 'A', long = "all-namespaces")]
    pub(super) all_namespaces: bool,
    /// Serve only this namespace: a name, a glob (`*`, `?`), a negation (`!name`), or a
    /// comma-separated list of them. Repeatable; the rightmost matching pattern wins.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    pub(super) namespaces: Vec<String>,
    /// Do not take part in peering, even if peering objects exist: this operator works
    /// whatever others do.
    #[arg(long, conflicts_with = "peering")]
    pub(super) standalone: bool,
    /// Development mode: peering priority 666, above the usual operators (as -p 666).
    #[arg(long, conflicts_with = "priority")]
    pub(super) dev: bool,
    /// Serve the liveness endpoint at this URL (e.g. http://0.0.0.0:8080/healthz): GET answers
    /// with the probe handlers' results as JSON. GET /readyz on the same host and port answers
    /// 200 once every resource has been listed, or while paused in favour of a peer or leader.
    #[arg(short = 'L', long, value_name = "URL", value_parser = crate::engines::probing::check_url)]
    pub(super) liveness: Option<String>,
    /// Peer with the operators of the peering object NAME (a ClusterKopfPeering with -A, a
    /// KopfPeering in each served namespace with -n): only the one of the highest priority
    /// works. Mandatory: without the peering CRD or object, this operator stays paused.
    /// Without -P or --standalone, the peering object "default" is used if its CRD exists.
    #[arg(short = 'P', long, value_name = "NAME")]
    pub(super) peering: Option<String>,
    /// This operator's peering priority [default: 0]: it pauses while a peer of a higher
    /// priority runs, and all pause while peers of the same priority do.
    #[arg(short = 'p', long, value_name = "N", allow_negative_numbers = true)]
    pub(super) priority: Option<i64>,
    /// Python modules to import (Kopf's `-m`): not for a compiled operator, whose handlers are
    /// in its binary; given, it is an error that says so.
    #[arg(short = 'm', long = "module", value_name = "MODULE")]
    pub(super) modules: Vec<String>,
    /// Serve Prometheus metrics at this URL (e.g. http://0.0.0.0:9090/metrics): handler
    /// invocations, durations and errors, watch events, workers and queue depth, API requests.
    #[arg(long, value_name = "URL", value_parser = crate::engines::metrics::check_url)]
    pub(super) metrics: Option<String>,
    /// Elect one leader with the coordination.k8s.io/v1 Lease NAME (in NAMESPACE, else the
    /// client's default namespace) instead of Kopf's peering, as controller-runtime does:
    /// client-go's algorithm and durations (15 s, renewed every 2 s within 10 s); only the
    /// leader serves. Implies --standalone. Not Kopf's: `rbac --lease` grants it.
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = LeaseName::parse, conflicts_with_all = ["peering", "priority", "dev"])]
    pub(super) lease: Option<LeaseName>,
    /// Split the objects with the other replicas run with the same N: N virtual shards,
    /// assigned to the live replicas with coordination.k8s.io/v1 Leases (kopf-shards-*, in
    /// the client's default namespace) and handed over live as replicas come and go
    /// (`settings.peering.sharding`). Not Kopf's: `rbac --shards` grants it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(super) shards: Option<u32>,
    /// Serve the admission webhooks at this URL (e.g. https://0.0.0.0:9443/webhooks; without
    /// a port, a free one), with a self-signed certificate, as Kopf's WebhookServer
    /// (`settings.admission.server`); http:// serves plain HTTP, behind a proxy that
    /// terminates TLS (Kopf's `insecure`). Not Kopf's.
    #[arg(long, value_name = "URL", value_parser = check_webhook_url)]
    pub(super) webhook_server: Option<String>,
    /// The host the cluster calls the webhooks at (e.g. host.k3d.internal) [default: from
    /// the address: 127.0.0.1 for 0.0.0.0, ::1 for ::]. Not Kopf's.
    #[arg(long, value_name = "HOST", requires = "webhook_server")]
    pub(super) webhook_host: Option<String>,
    /// Keep the webhook certificate in this Secret (in NAMESPACE, else the client's default
    /// namespace, the pod's own), shared by every replica: the first makes it, the others read
    /// it, and it is renewed there before it expires (`WebhookServer::secret`). Not Kopf's:
    /// `rbac --webhook-secret` grants it.
    #[arg(long, value_name = "[NAMESPACE/]NAME", requires = "webhook_server", value_parser = secret_name)]
    pub(super) webhook_secret: Option<LeaseName>,
    /// Keep the ValidatingWebhookConfiguration and MutatingWebhookConfiguration of this
    /// name (e.g. auto.kopf.dev) filled with the admission handlers' webhooks
    /// (`settings.admission.managed`). Not Kopf's: `rbac --admission-managed` grants it.
    #[arg(long, value_name = "NAME")]
    pub(super) admission_managed: Option<String>,
    /// Python files to load (Kopf's PATHS): not for a compiled operator, whose handlers are in
    /// its binary; given, it is an error that says so.
    #[arg(value_name = "PATHS")]
    pub(super) paths: Vec<String>,
}

/// The Lease of `--lease`: `[NAMESPACE/]NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LeaseName {
    pub(super) namespace: Option<String>,
    pub(super) name: String,
}

/// The Secret of `--webhook-secret`: `[NAMESPACE/]NAME`, as a Lease's.
pub(super) fn secret_name(text: &str) -> Result<LeaseName, String> {
    LeaseName::parse(text).map_err(|error| error.replace("is not a Lease", "is not a Secret"))
}

impl LeaseName {
    pub(super) fn parse(text: &str) -> Result<LeaseName, String> {
        let (namespace, name) = match text.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, text),
        };
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 253
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !valid(name) || !namespace.is_none_or(valid) {
            return Err(format!(
                "{text:?} is not a Lease: [NAMESPACE/]NAME, each of lowercase letters, digits, '-' and '.'"
            ));
        }
        Ok(LeaseName {
            namespace: namespace.map(String::from),
            name: name.to_string(),
        })
    }
}

/// Checks a `--webhook-server` URL: the URL itself, or what is wrong with it.
pub(super) fn check_webhook_url(url: &str) -> Result<String, String> {
    WebhookServer::from_url(url).map(|_| url.to_string())
}

/// Parses the command line; the program name is the first item.
pub(super) fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let name = args
        .first()
        .and_then(|arg0| program(arg0))
        .unwrap_or_else(|| "operator".to_string());
    let mut command = Cli::command().display_name(name.clone()).bin_name(name);
    let matches = command.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
}

/// A usage error (exit code 2) about the environment or a combination of options.
pub(super) fn usage(kind: clap::error::ErrorKind, message: String) -> clap::Error {
    let mut command = Cli::command();
    if let Some(name) = std::env::args_os().next().as_deref().and_then(program) {
        command = command.bin_name(name);
    }
    command.error(kind, message)
}

/// The program's name, from the first command-line item.
pub(super) fn program(arg0: &std::ffi::OsStr) -> Option<String> {
    let name = std::path::Path::new(arg0).file_name()?;
    Some(name.to_string_lossy().into_owned())
}
