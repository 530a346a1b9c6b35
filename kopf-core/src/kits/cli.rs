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

use crate::aiokits::connections::Connections;
use crate::configs::settings::{LeaseSettings, Settings, ShardingSettings};
use crate::engines::peering::{self, Mark};
use crate::intents::registry::Registry;
use crate::kits::logging;
use crate::kits::{manifests, stderr};
use crate::reactor::operator::{Operator, OperatorError};
use crate::structs::namespaces::NamespacePatterns;

mod arguments;
mod options;

use arguments::{
    Command, FREEZE_PRIORITY, FreezeArgs, LeaseName, PeeringTarget, RbacArgs, RunArgs, parse_from,
    usage,
};
use options::{DEV_PRIORITY, Options, parse_bool, resolve, resolve_as};

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

#[cfg(test)]
mod tests;
