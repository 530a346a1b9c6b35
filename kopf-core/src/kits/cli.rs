//! The operator binary: Kopf's `kopf run` command line, logging, and exit codes.
//!
//! ```no_run
//! #[kopf::on_create("kopf.dev", "v1", "kopfexamples")]
//! async fn create_fn(name: &str) -> kopf::Result<serde_json::Value> {
//!     Ok(serde_json::json!({"message": format!("hello {name}")}))
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     kopf::run().await
//! }
//! ```
//!
//! `my-operator --help` lists the options; `run` is the default subcommand, so
//! `my-operator -n default` and `my-operator run -n default` are the same.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::aiokits::connections::Connections;
use crate::configs::settings::{LeaseSettings, Settings, ShardingSettings};
use crate::configs::webhooks::WebhookServer;
use crate::engines::peering::{self, Mark};
use crate::intents::registry::Registry;
use crate::kits::logging::{self, LogFormat, LogStyle};
use crate::kits::{manifests, stderr};
use crate::reactor::operator::{Operator, OperatorError};
use crate::structs::namespaces::NamespacePatterns;

/// Runs the handlers registered by the `#[kopf::on_*]` attributes as Kopf's `kopf run` does:
/// parses the command line, sets up logging, runs until SIGINT or SIGTERM, and returns the
/// process's exit code. Return it from `main`:
///
/// ```no_run
/// #[tokio::main]
/// async fn main() -> std::process::ExitCode {
///     kopf::run().await
/// }
/// ```
///
/// Exit codes: 0 after a graceful stop (and for `--help`); 1 if the operator could not run
/// (no cluster configuration, invalid namespace patterns) or had to abort work after the
/// grace period; 2 for invalid arguments or environment variables; 130 when a second signal
/// stopped it at once.
///
/// Logging is set up only if the program has not installed a `tracing` subscriber already.
pub async fn run() -> ExitCode {
    run_with(Registry::collected()).await
}

/// As [`run`], with an explicit registry instead of the automatically registered handlers.
pub async fn run_with(registry: Registry) -> ExitCode {
    let code = command(registry).await;
    // The process exits next: the log lines still waiting for their thread are written first.
    stderr::flush().await;
    code
}

/// The command that the arguments ask for, to its exit code.
async fn command(registry: Registry) -> ExitCode {
    let cli = match parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(error) => return usage_exit(&error),
    };
    let args = match cli.command {
        Some(Command::Crd) => {
            print!("{}", manifests::crd_yaml(&registry));
            return ExitCode::SUCCESS;
        }
        Some(Command::Rbac(args)) => {
            return match rbac(&registry, args, |name| std::env::var(name).ok()) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(error) => usage_exit(&error),
            };
        }
        Some(Command::Freeze(args)) => {
            let env = |name: &str| std::env::var(name).ok();
            return match resolve_freeze(args, env) {
                Ok(marking) => mark(marking).await,
                Err(error) => usage_exit(&error),
            };
        }
        Some(Command::Resume(args)) => {
            let env = |name: &str| std::env::var(name).ok();
            return match resolve_mark("KOPF_RESUME_", args.target, Mark::Resume, env) {
                Ok(marking) => mark(marking).await,
                Err(error) => usage_exit(&error),
            };
        }
        Some(Command::Run(args)) => args,
        None => cli.run,
    };
    let options = match resolve(args, |name| std::env::var(name).ok()) {
        Ok(options) => options,
        Err(error) => return usage_exit(&error),
    };
    logging::init(options.filter, &options.style);
    let mut settings = Settings::default();
    if let Some(name) = &options.peering {
        settings.peering.name.clone_from(name);
        settings.peering.mandatory = true;
    }
    if let Some(priority) = options.priority {
        settings.peering.priority = priority;
    }
    settings.peering.standalone = options.standalone;
    if let Some(LeaseName { namespace, name }) = options.lease {
        let mut lease = LeaseSettings::new(name);
        lease.namespace = namespace;
        settings.peering.lease = Some(lease);
    }
    if let Some(shards) = options.shards {
        settings.peering.sharding = Some(ShardingSettings::new(shards));
    }
    settings.admission.server = options.webhook_server;
    settings.admission.managed = options.admission_managed;
    let mut operator = Operator::new(registry).settings(settings);
    match &options.namespaces {
        Some(patterns) => operator = operator.namespaces(patterns.clone()),
        None if !options.clusterwide => {
            tracing::warn!(target: "kopf::cli", "Absence of either namespaces or cluster-wide flag will become an error soon. For now, switching to the cluster-wide mode for backward compatibility.");
        }
        None => {}
    }
    if let Some(url) = options.liveness {
        operator = operator.liveness(url);
    }
    if let Some(url) = options.metrics {
        operator = operator.metrics(url);
    }
    exit_code(operator.run_until_signalled().await)
}

/// `freeze` and `resume`: writes or removes an entry in the peering objects, as Kopf's
/// subcommands do, so that they pause and resume Python Kopf operators too.
async fn mark(marking: Marking) -> ExitCode {
    let Marking {
        options,
        peering: peering_name,
        id,
        mark,
    } = marking;
    logging::init(options.filter, &options.style);
    let patterns = options.namespaces;
    let patterns = match patterns
        .as_deref()
        .map(NamespacePatterns::parse)
        .transpose()
    {
        Ok(patterns) => patterns,
        Err(error) => {
            tracing::error!(target: "kopf::cli", "{error}");
            return ExitCode::FAILURE;
        }
    };
    let connections = Connections::default();
    let networking = Settings::default().networking;
    let client = match crate::structs::credentials::default_client(
        connections.clone(),
        networking.connect_timeout,
        networking.trust_env,
    )
    .await
    {
        Ok((client, _)) => client,
        Err(error) => {
            tracing::error!(target: "kopf::cli", "cannot connect to the cluster: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut settings = Settings::default();
    settings.peering.name = peering_name;
    let identity = id.unwrap_or_else(peering::manual_identity);
    let marked = peering::mark(&client, &settings, patterns.as_ref(), &identity, mark).await;
    drop(client);
    connections.close().await;
    match marked {
        Ok(places) => {
            let done = match mark {
                Mark::Freeze { .. } => "Frozen",
                Mark::Resume => "Resumed",
            };
            tracing::info!(target: "kopf::cli", "{done} as {identity:?} in the peering {:?}: {}.", settings.peering.name, places.join(", "));
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(target: "kopf::cli", "{error}");
            ExitCode::FAILURE
        }
    }
}

/// What `freeze` or `resume` asks for, from the command line and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Marking {
    /// The namespaces and logging, as `run` takes them.
    options: Options,
    /// The peering object's name (`-P`).
    peering: String,
    /// The entry's identity (`-i`), if given.
    id: Option<String>,
    mark: Mark,
}

/// The options of `freeze`, completed from Kopf's `KOPF_FREEZE_*` variables where the command
/// line says nothing (`KOPF_FREEZE_PEERING`, `_LIFETIME`, `_PRIORITY`, `_DEV`, `_ID`,
/// `_MESSAGE`, `_NAMESPACES`, `_CLUSTERWIDE`, and the logging ones).
fn resolve_freeze(
    args: FreezeArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Marking, clap::Error> {
    let var = |name: &str| env(&format!("KOPF_FREEZE_{name}")).filter(|value| !value.is_empty());
    let number = |name: &str| -> Result<Option<i64>, clap::Error> {
        var(name)
            .map(|value| {
                value.trim().parse::<i64>().map_err(|_| {
                    usage(
                        clap::error::ErrorKind::InvalidValue,
                        format!("KOPF_FREEZE_{name}={value:?} is not an integer"),
                    )
                })
            })
            .transpose()
    };
    let lifetime = match args.lifetime {
        Some(lifetime) => lifetime,
        None => match number("LIFETIME")? {
            Some(lifetime) => u64::try_from(lifetime).map_err(|_| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("KOPF_FREEZE_LIFETIME={lifetime} is not a number of seconds"),
                )
            })?,
            None => {
                return Err(usage(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    "the freeze's lifetime is required: -t/--lifetime SECONDS (or KOPF_FREEZE_LIFETIME)"
                        .to_string(),
                ));
            }
        },
    };
    let dev = args.dev
        || match var("DEV") {
            None => false,
            Some(value) => parse_bool(&value).ok_or_else(|| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("KOPF_FREEZE_DEV={value:?} is not a valid boolean"),
                )
            })?,
        };
    let priority = match args.priority {
        Some(priority) => priority,
        None => number("PRIORITY")?.unwrap_or(FREEZE_PRIORITY),
    };
    let priority = if dev { DEV_PRIORITY } else { priority };
    let lifetime = Duration::from_secs(lifetime);
    resolve_mark(
        "KOPF_FREEZE_",
        args.target,
        Mark::Freeze { priority, lifetime },
        env,
    )
}

/// The options common to `freeze` and `resume`, completed from the variables of `prefix`.
fn resolve_mark(
    prefix: &str,
    target: PeeringTarget,
    mark: Mark,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Marking, clap::Error> {
    // Only the variables of the options that the subcommand has (Kopf's click reads no
    // others): `KOPF_FREEZE_LIVENESS` means nothing.
    const OWN: [&str; 9] = [
        "NAMESPACES",
        "CLUSTERWIDE",
        "VERBOSE",
        "DEBUG",
        "QUIET",
        "LOG_FORMAT",
        "LOG_REFKEY",
        "LOG_PREFIX",
        "ID",
    ];
    let outer = |name: &str| env(name);
    let env = |name: &str| {
        let own = name
            .strip_prefix(prefix)
            .is_some_and(|suffix| OWN.contains(&suffix));
        own.then(|| env(name)).flatten()
    };
    let peering = match target
        .peering
        .or_else(|| outer(&format!("{prefix}PEERING")))
    {
        Some(peering) if !peering.is_empty() => peering,
        _ => {
            return Err(usage(
                clap::error::ErrorKind::MissingRequiredArgument,
                format!(
                    "the peering object's name is required: -P/--peering NAME (or {prefix}PEERING)"
                ),
            ));
        }
    };
    let id = target
        .id
        .or_else(|| env(&format!("{prefix}ID")).filter(|id| !id.is_empty()));
    let run = RunArgs {
        log: target.log,
        namespaces: target.namespaces,
        all_namespaces: target.all_namespaces,
        ..RunArgs::default()
    };
    let options = resolve_as(prefix, run, env)?;
    Ok(Marking {
        options,
        peering,
        id,
        mark,
    })
}

/// A boolean as click reads one from the environment.
fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" | "on" => Some(true),
        "0" | "false" | "f" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}

/// Prints a usage error and returns its exit code (0 for `--help`, else 2).
fn usage_exit(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
}

/// What `my-operator rbac ARGS...` prints for this registry (the options as the subcommand
/// takes them, `-n`, `-A`, `--service-account`, ...; environment variables are not read):
/// for tests that apply it, and tools that write it out.
///
/// ```
/// let registry = kopf::registry::Registry::new();
/// let yaml = kopf::rbac::rbac_manifest(&registry, ["-n", "default"]).unwrap();
/// assert!(yaml.contains("kind: RoleBinding"));
/// ```
///
/// # Errors
///
/// Invalid options, with the subcommand's usage.
pub fn rbac_manifest<I, T>(registry: &Registry, args: I) -> Result<String, String>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let command_line = ["operator".into(), "rbac".into()]
        .into_iter()
        .chain(args.into_iter().map(Into::into));
    let cli = parse_from(command_line).map_err(|error| error.render().to_string())?;
    match cli.command {
        Some(Command::Rbac(args)) => {
            rbac(registry, args, |_| None).map_err(|error| error.render().to_string())
        }
        _ => Err("not the options of `rbac`".to_string()),
    }
}

/// The text of `rbac`: the namespaces as `run` takes them (with Kopf's environment variables).
fn rbac(
    registry: &Registry,
    args: RbacArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, clap::Error> {
    let RbacArgs {
        namespaces,
        all_namespaces,
        service_account,
        service_account_namespace,
        no_service_account,
        lease,
        admission_managed,
        shards,
        webhook_secret,
    } = args;
    let run = RunArgs {
        namespaces,
        all_namespaces,
        lease,
        ..RunArgs::default()
    };
    let options = resolve(run, env)?;
    let lease = options.lease.map(|lease| manifests::LeaseRef {
        namespace: lease
            .namespace
            .unwrap_or_else(|| service_account_namespace.clone()),
        name: lease.name,
    });
    let webhook_secret = webhook_secret.map(|secret| manifests::SecretRef {
        namespace: secret
            .namespace
            .unwrap_or_else(|| service_account_namespace.clone()),
        name: secret.name,
    });
    let options = manifests::RbacOptions {
        namespaces: options.namespaces,
        lease,
        webhook_secret,
        service_account,
        service_account_namespace,
        with_service_account: !no_service_account,
        admission_managed,
        shards: shards.is_some(),
    };
    manifests::rbac_yaml(registry, &options)
        .map_err(|error| usage(clap::error::ErrorKind::InvalidValue, error.to_string()))
}

/// The exit code for the operator's result (logging the error, if any).
fn exit_code(result: Result<(), OperatorError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(OperatorError::Interrupted) => {
            tracing::error!(target: "kopf::cli", "{}", OperatorError::Interrupted);
            ExitCode::from(130)
        }
        Err(error) => {
            tracing::error!(target: "kopf::cli", "{error}");
            ExitCode::FAILURE
        }
    }
}

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
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

impl Cli {
    /// The options of `run` (the default subcommand); `None` for the other subcommands.
    #[cfg(test)]
    fn args(self) -> RunArgs {
        match self.command {
            Some(Command::Run(args)) => args,
            None => self.run,
            Some(Command::Crd | Command::Rbac(_) | Command::Freeze(_) | Command::Resume(_)) => {
                panic!("not a run")
            }
        }
    }
}

const ENVIRONMENT: &str = "\
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
enum Command {
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
struct PeeringTarget {
    #[command(flatten)]
    log: LogArgs,
    /// The identity of the entry [default: POD_ID, else USER@HOST, as Kopf's].
    #[arg(short = 'i', long = "id", value_name = "ID")]
    id: Option<String>,
    /// The KopfPeering in each of these namespaces (patterns as for `run`) rather than the
    /// ClusterKopfPeering.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    namespaces: Vec<String>,
    /// The ClusterKopfPeering (the default).
    #[arg(short = 'A', long = "all-namespaces")]
    all_namespaces: bool,
    /// The peering object's name [env: KOPF_FREEZE_PEERING or KOPF_RESUME_PEERING].
    #[arg(short = 'P', long, value_name = "NAME")]
    peering: Option<String>,
}

/// The options of `freeze`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
struct FreezeArgs {
    #[command(flatten)]
    target: PeeringTarget,
    /// A message (accepted as Kopf's command line accepts it; not written anywhere).
    #[arg(short = 'm', long, value_name = "TEXT")]
    message: Option<String>,
    /// How long the freeze lasts, in seconds: then the paused operators resume (required).
    #[arg(short = 't', long, value_name = "SECONDS")]
    lifetime: Option<u64>,
    /// The entry's priority: operators of lower priorities pause [default: 100].
    #[arg(short = 'p', long, value_name = "N", allow_negative_numbers = true)]
    priority: Option<i64>,
    /// Development mode: priority 666, whatever -p says (as Kopf).
    #[arg(long)]
    dev: bool,
}

/// The options of `resume`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
struct ResumeArgs {
    #[command(flatten)]
    target: PeeringTarget,
}

const FREEZE_ENVIRONMENT: &str = "\
Environment variables (as Kopf's CLI; the command line wins): KOPF_FREEZE_PEERING,
KOPF_FREEZE_LIFETIME, KOPF_FREEZE_PRIORITY, KOPF_FREEZE_DEV, KOPF_FREEZE_ID,
KOPF_FREEZE_MESSAGE, KOPF_FREEZE_NAMESPACES (space-separated), KOPF_FREEZE_CLUSTERWIDE,
KOPF_FREEZE_VERBOSE, KOPF_FREEZE_DEBUG, KOPF_FREEZE_QUIET, KOPF_FREEZE_LOG_FORMAT,
KOPF_FREEZE_LOG_REFKEY, KOPF_FREEZE_LOG_PREFIX.";

const RESUME_ENVIRONMENT: &str = "\
Environment variables (as Kopf's CLI; the command line wins): KOPF_RESUME_PEERING,
KOPF_RESUME_ID, KOPF_RESUME_NAMESPACES (space-separated), KOPF_RESUME_CLUSTERWIDE,
KOPF_RESUME_VERBOSE, KOPF_RESUME_DEBUG, KOPF_RESUME_QUIET, KOPF_RESUME_LOG_FORMAT,
KOPF_RESUME_LOG_REFKEY, KOPF_RESUME_LOG_PREFIX.";

/// The priority of `freeze` (Kopf's).
const FREEZE_PRIORITY: i64 = 100;

const RBAC_NOTE: &str = "\
The RBAC is computed from the handlers, without a cluster: what the framework does with the
handled resources, events, CRDs and peering, and what the program declares (`owns = [..]`
and `reads = [..]` on handlers, `Registry::rbac_rule`). Other calls that handlers make with
their `client` are not covered: the output names the handlers that take a `client` and
declare nothing. Resources given by a name that discovery resolves (a short name, a kind, no
group) are printed as given: check them.";

/// The options of `rbac`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
struct RbacArgs {
    /// The namespace patterns the operator will serve, as for `run`: plain names get Roles,
    /// globs and negations a ClusterRole (with the right to list namespaces).
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    namespaces: Vec<String>,
    /// The operator will serve all namespaces: a ClusterRole.
    #[arg(short = 'A', long = "all-namespaces")]
    all_namespaces: bool,
    /// The ServiceAccount the roles are bound to, also the roles' name.
    #[arg(long, value_name = "NAME", default_value = "kopf-operator")]
    service_account: String,
    /// The ServiceAccount's namespace.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    service_account_namespace: String,
    /// Do not print the ServiceAccount itself, only the roles and bindings.
    #[arg(long)]
    no_service_account: bool,
    /// The Lease that `run --lease` elects a leader with: a Role in its namespace (without
    /// one, the ServiceAccount's, which is the pod's) to get, create and update it; no rights
    /// on Kopf's peering objects (`run --lease` implies --standalone).
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = LeaseName::parse)]
    lease: Option<LeaseName>,
    /// The operator runs with assigned shards (`run --shards N`; N is accepted and not
    /// needed): a Role in the ServiceAccount's namespace (the pod's, where the operator keeps
    /// the shards' Leases) to get, list, watch, create, update and delete Leases.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    shards: Option<u32>,
    /// The name of the managed webhook configurations (`settings.admission.managed`, e.g.
    /// auto.kopf.dev): the ClusterRole creates validating and mutating webhook
    /// configurations and patches those of this name.
    #[arg(long, value_name = "NAME")]
    admission_managed: Option<String>,
    /// The Secret that keeps the webhook certificate (`run --webhook-secret`): a Role in its
    /// namespace (without one, the ServiceAccount's) to create Secrets, and to get and update
    /// that one.
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = secret_name)]
    webhook_secret: Option<LeaseName>,
}

/// The logging options of every subcommand (Kopf's `logging_options`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
struct LogArgs {
    /// Log at DEBUG, without the internals of the HTTP and Kubernetes client libraries.
    #[arg(short, long)]
    verbose: bool,
    /// Log at DEBUG, everything.
    #[arg(short, long)]
    debug: bool,
    /// Log warnings and errors only.
    #[arg(short, long)]
    quiet: bool,
    /// How log lines look [default: full]: the message with its object (plain), with time,
    /// target and level too (full), or one JSON object per line (json).
    #[arg(long, value_enum, value_name = "FORMAT")]
    log_format: Option<LogFormat>,
    /// In JSON log lines, the key of the object a line is about [default: object].
    #[arg(long, value_name = "KEY")]
    log_refkey: Option<String>,
    /// Prefix messages with the object they are about, `[namespace/name]` [default: on,
    /// except in JSON lines].
    #[arg(long, overrides_with = "no_log_prefix")]
    log_prefix: bool,
    /// Do not prefix messages with the object they are about.
    #[arg(long, overrides_with = "log_prefix")]
    no_log_prefix: bool,
}

/// The options of `run`, in the order of Kopf's `kopf run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
struct RunArgs {
    #[command(flatten)]
    log: LogArgs,
    /// Serve all namespaces and the cluster-scoped resources.
    #[arg(short = 'A', long = "all-namespaces")]
    all_namespaces: bool,
    /// Serve only this namespace: a name, a glob (`*`, `?`), a negation (`!name`), or a
    /// comma-separated list of them. Repeatable; the rightmost matching pattern wins.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    namespaces: Vec<String>,
    /// Do not take part in peering, even if peering objects exist: this operator works
    /// whatever others do.
    #[arg(long, conflicts_with = "peering")]
    standalone: bool,
    /// Development mode: peering priority 666, above the usual operators (as -p 666).
    #[arg(long, conflicts_with = "priority")]
    dev: bool,
    /// Serve the liveness endpoint at this URL (e.g. http://0.0.0.0:8080/healthz): GET answers
    /// with the probe handlers' results as JSON. GET /readyz on the same host and port answers
    /// 200 once every resource has been listed, or while paused in favour of a peer or leader.
    #[arg(short = 'L', long, value_name = "URL", value_parser = crate::engines::probing::check_url)]
    liveness: Option<String>,
    /// Peer with the operators of the peering object NAME (a ClusterKopfPeering with -A, a
    /// KopfPeering in each served namespace with -n): only the one of the highest priority
    /// works. Mandatory: without the peering CRD or object, this operator stays paused.
    /// Without -P or --standalone, the peering object "default" is used if its CRD exists.
    #[arg(short = 'P', long, value_name = "NAME")]
    peering: Option<String>,
    /// This operator's peering priority [default: 0]: it pauses while a peer of a higher
    /// priority runs, and all pause while peers of the same priority do.
    #[arg(short = 'p', long, value_name = "N", allow_negative_numbers = true)]
    priority: Option<i64>,
    /// Python modules to import (Kopf's `-m`): not for a compiled operator, whose handlers are
    /// in its binary; given, it is an error that says so.
    #[arg(short = 'm', long = "module", value_name = "MODULE")]
    modules: Vec<String>,
    /// Serve Prometheus metrics at this URL (e.g. http://0.0.0.0:9090/metrics): handler
    /// invocations, durations and errors, watch events, workers and queue depth, API requests.
    #[arg(long, value_name = "URL", value_parser = crate::engines::metrics::check_url)]
    metrics: Option<String>,
    /// Elect one leader with the coordination.k8s.io/v1 Lease NAME (in NAMESPACE, else the
    /// client's default namespace) instead of Kopf's peering, as controller-runtime does:
    /// client-go's algorithm and durations (15 s, renewed every 2 s within 10 s); only the
    /// leader serves. Implies --standalone. Not Kopf's: `rbac --lease` grants it.
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = LeaseName::parse, conflicts_with_all = ["peering", "priority", "dev"])]
    lease: Option<LeaseName>,
    /// Split the objects with the other replicas run with the same N: N virtual shards,
    /// assigned to the live replicas with coordination.k8s.io/v1 Leases (kopf-shards-*, in
    /// the client's default namespace) and handed over live as replicas come and go
    /// (`settings.peering.sharding`). Not Kopf's: `rbac --shards` grants it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    shards: Option<u32>,
    /// Serve the admission webhooks at this URL (e.g. https://0.0.0.0:9443/webhooks; without
    /// a port, a free one), with a self-signed certificate, as Kopf's WebhookServer
    /// (`settings.admission.server`); http:// serves plain HTTP, behind a proxy that
    /// terminates TLS (Kopf's `insecure`). Not Kopf's.
    #[arg(long, value_name = "URL", value_parser = check_webhook_url)]
    webhook_server: Option<String>,
    /// The host the cluster calls the webhooks at (e.g. host.k3d.internal) [default: from
    /// the address: 127.0.0.1 for 0.0.0.0, ::1 for ::]. Not Kopf's.
    #[arg(long, value_name = "HOST", requires = "webhook_server")]
    webhook_host: Option<String>,
    /// Keep the webhook certificate in this Secret (in NAMESPACE, else the client's default
    /// namespace, the pod's own), shared by every replica: the first makes it, the others read
    /// it, and it is renewed there before it expires (`WebhookServer::secret`). Not Kopf's:
    /// `rbac --webhook-secret` grants it.
    #[arg(long, value_name = "[NAMESPACE/]NAME", requires = "webhook_server", value_parser = secret_name)]
    webhook_secret: Option<LeaseName>,
    /// Keep the ValidatingWebhookConfiguration and MutatingWebhookConfiguration of this
    /// name (e.g. auto.kopf.dev) filled with the admission handlers' webhooks
    /// (`settings.admission.managed`). Not Kopf's: `rbac --admission-managed` grants it.
    #[arg(long, value_name = "NAME")]
    admission_managed: Option<String>,
    /// Python files to load (Kopf's PATHS): not for a compiled operator, whose handlers are in
    /// its binary; given, it is an error that says so.
    #[arg(value_name = "PATHS")]
    paths: Vec<String>,
}

/// The Lease of `--lease`: `[NAMESPACE/]NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaseName {
    namespace: Option<String>,
    name: String,
}

/// The Secret of `--webhook-secret`: `[NAMESPACE/]NAME`, as a Lease's.
fn secret_name(text: &str) -> Result<LeaseName, String> {
    LeaseName::parse(text).map_err(|error| error.replace("is not a Lease", "is not a Secret"))
}

impl LeaseName {
    fn parse(text: &str) -> Result<LeaseName, String> {
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

/// What the command line and the environment ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    /// The namespace patterns; `None` serves the cluster.
    namespaces: Option<Vec<String>>,
    /// `-A` was given (else a missing `-n` is warned about, as Kopf does).
    clusterwide: bool,
    /// The tracing filter; `None` uses `RUST_LOG`, else INFO.
    filter: Option<&'static str>,
    /// How log lines look.
    style: LogStyle,
    /// The liveness endpoint's URL, if any.
    liveness: Option<String>,
    /// The metrics endpoint's URL, if any.
    metrics: Option<String>,
    /// The mandatory peering's name (`-P`), if any.
    peering: Option<String>,
    /// The peering priority (`-p`, or 666 for `--dev`), if given.
    priority: Option<i64>,
    /// No peering at all (`--standalone`).
    standalone: bool,
    /// The Lease to elect a leader with (`--lease`), if any.
    lease: Option<LeaseName>,
    /// The number of assigned shards (`--shards`), if any.
    shards: Option<u32>,
    /// The admission webhook server (`--webhook-server`, `--webhook-host`), if any.
    webhook_server: Option<WebhookServer>,
    /// The managed webhook configurations' name (`--admission-managed`), if any.
    admission_managed: Option<String>,
}

/// Checks a `--webhook-server` URL: the URL itself, or what is wrong with it.
fn check_webhook_url(url: &str) -> Result<String, String> {
    WebhookServer::from_url(url).map(|_| url.to_string())
}

/// Parses the command line; the program name is the first item.
fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
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

/// Completes the options from the environment as Kopf's click CLI does
/// (`auto_envvar_prefix='KOPF'`: the command line wins; `KOPF_RUN_NAMESPACE` is appended).
fn resolve(args: RunArgs, env: impl Fn(&str) -> Option<String>) -> Result<Options, clap::Error> {
    resolve_as("KOPF_RUN_", args, env)
}

/// As [`resolve`], with the variables of a subcommand: `prefix` is `KOPF_RUN_`,
/// `KOPF_FREEZE_` or `KOPF_RESUME_` (click's `auto_envvar_prefix` and the command's name).
fn resolve_as(
    prefix: &str,
    args: RunArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Options, clap::Error> {
    let var = |name: &str| format!("{prefix}{name}");
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let flag = |given: bool, name: &str| -> Result<bool, clap::Error> {
        if given {
            return Ok(true);
        }
        match env(name) {
            None => Ok(false),
            Some(value) => parse_bool(&value).ok_or_else(|| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("{name}={value:?} is not a valid boolean"),
                )
            }),
        }
    };
    let mut namespaces = args.namespaces;
    if namespaces.is_empty()
        && let Some(value) = env(&var("NAMESPACES"))
    {
        namespaces.extend(value.split_whitespace().map(String::from));
    }
    if let Some(value) = env(&var("NAMESPACE")) {
        namespaces.push(value);
    }
    let clusterwide = flag(args.all_namespaces, &var("CLUSTERWIDE"))?;
    if clusterwide && !namespaces.is_empty() {
        return Err(usage(
            clap::error::ErrorKind::ArgumentConflict,
            "Either --namespace or --all-namespaces can be used, not both.".to_string(),
        ));
    }
    if let Some(given) = args.modules.first().or(args.paths.first()) {
        return Err(usage(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "{given:?}: a kopf-rs operator is a compiled binary whose handlers are in it, so Kopf's -m/--module and PATHS do not apply; run the binary without them"
            ),
        ));
    }
    let args_log = &args.log;
    let verbose = flag(args_log.verbose, &var("VERBOSE"))?;
    let debug = flag(args_log.debug, &var("DEBUG"))?;
    let quiet = flag(args_log.quiet, &var("QUIET"))?;
    let prefix = if args_log.log_prefix {
        Some(true)
    } else if args_log.no_log_prefix {
        Some(false)
    } else if env(&var("LOG_PREFIX")).is_some() {
        Some(flag(false, &var("LOG_PREFIX"))?)
    } else {
        None
    };
    let refkey = args_log
        .log_refkey
        .clone()
        .or_else(|| env(&var("LOG_REFKEY")));
    let format = match args_log.log_format {
        Some(format) => format,
        None => match env(&var("LOG_FORMAT")) {
            None => LogFormat::default(),
            Some(value) => LogFormat::from_str(&value, true).map_err(|_| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "{}={value:?} is not one of plain, full, json",
                        var("LOG_FORMAT")
                    ),
                )
            })?,
        },
    };
    let liveness = match args.liveness {
        Some(url) => Some(url),
        None => env(&var("LIVENESS"))
            .map(|url| {
                crate::engines::probing::check_url(&url).map_err(|error| {
                    usage(
                        clap::error::ErrorKind::InvalidValue,
                        format!("{}={url:?} is not a liveness URL: {error}", var("LIVENESS")),
                    )
                })
            })
            .transpose()?,
    };
    let metrics = match args.metrics {
        Some(url) => Some(url),
        None => env(&var("METRICS"))
            .map(|url| {
                crate::engines::metrics::check_url(&url)
                    .map_err(|error| usage(clap::error::ErrorKind::InvalidValue, error.to_string()))
            })
            .transpose()?,
    };
    let lease = match args.lease {
        Some(lease) => Some(lease),
        None => env(&var("LEASE"))
            .map(|value| {
                LeaseName::parse(&value).map_err(|error| {
                    usage(
                        clap::error::ErrorKind::InvalidValue,
                        format!("{}: {error}", var("LEASE")),
                    )
                })
            })
            .transpose()?,
    };
    let standalone = lease.is_some() || flag(args.standalone, &var("STANDALONE"))?;
    let shards = match args.shards {
        Some(shards) => Some(shards),
        None => env(&var("SHARDS"))
            .map(|value| match value.trim().parse::<u32>() {
                Ok(shards) if (1..=4096).contains(&shards) => Ok(shards),
                _ => Err(usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "{}={value:?} is not a number of shards from 1 to 4096",
                        var("SHARDS")
                    ),
                )),
            })
            .transpose()?,
    };
    let webhook_server = match args.webhook_server.or_else(|| env(&var("WEBHOOK_SERVER"))) {
        None => None,
        Some(url) => {
            let server = WebhookServer::from_url(&url)
                .map_err(|error| usage(clap::error::ErrorKind::InvalidValue, error))?;
            let server = match args.webhook_host.or_else(|| env(&var("WEBHOOK_HOST"))) {
                Some(host) => server.host(host),
                None => server,
            };
            let secret = match args.webhook_secret {
                Some(secret) => Some(secret),
                None => env(&var("WEBHOOK_SECRET"))
                    .map(|value| {
                        secret_name(&value).map_err(|error| {
                            usage(
                                clap::error::ErrorKind::InvalidValue,
                                format!("{}: {error}", var("WEBHOOK_SECRET")),
                            )
                        })
                    })
                    .transpose()?,
            };
            match secret {
                // No namespace: the client's default, resolved when the server starts.
                Some(secret) => {
                    Some(server.secret(secret.namespace.unwrap_or_default(), secret.name))
                }
                None => Some(server),
            }
        }
    };
    let admission_managed = args
        .admission_managed
        .or_else(|| env(&var("ADMISSION_MANAGED")));
    let peering = args.peering.or_else(|| env(&var("PEERING")));
    let priority = match (args.priority, args.dev) {
        (Some(priority), _) => Some(priority),
        (None, true) => Some(DEV_PRIORITY),
        (None, false) => match env(&var("PRIORITY")) {
            Some(value) => Some(value.trim().parse().map_err(|_| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("{}={value:?} is not an integer", var("PRIORITY")),
                )
            })?),
            None => flag(false, &var("DEV"))?.then_some(DEV_PRIORITY),
        },
    };
    // As Kopf: debug or verbose beat quiet.
    let filter = if debug {
        Some("debug")
    } else if verbose {
        Some(VERBOSE)
    } else if quiet {
        Some("warn")
    } else {
        None
    };
    Ok(Options {
        namespaces: (!namespaces.is_empty()).then_some(namespaces),
        clusterwide,
        filter,
        style: LogStyle {
            format,
            prefix,
            refkey,
        },
        liveness,
        metrics,
        peering,
        priority,
        standalone,
        lease,
        shards,
        webhook_server,
        admission_managed,
    })
}

/// The priority of `--dev` (Kopf's).
const DEV_PRIORITY: i64 = 666;

/// `-v`: DEBUG, but not the client libraries' internals (Kopf leaves out asyncio's and
/// aiohttp's).
const VERBOSE: &str = "debug,hyper=info,hyper_util=info,h2=info,tower=info,rustls=info,kube_client=info,kube_runtime=info";

/// A usage error (exit code 2) about the environment or a combination of options.
fn usage(kind: clap::error::ErrorKind, message: String) -> clap::Error {
    let mut command = Cli::command();
    if let Some(name) = std::env::args_os().next().as_deref().and_then(program) {
        command = command.bin_name(name);
    }
    command.error(kind, message)
}

/// The program's name, from the first command-line item.
fn program(arg0: &std::ffi::OsStr) -> Option<String> {
    let name = std::path::Path::new(arg0).file_name()?;
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests;
