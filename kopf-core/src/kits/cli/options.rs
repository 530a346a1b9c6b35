//! The options of `run` (and of `freeze` and `resume`) completed from the environment as
//! Kopf's click CLI completes them: the command line wins, then `KOPF_RUN_*` variables.

use clap::ValueEnum;

use super::arguments::{LeaseName, RunArgs, secret_name, usage};
use crate::configs::webhooks::WebhookServer;
use crate::kits::logging::{LogFormat, LogStyle};

/// What the command line and the environment ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Options {
    /// The namespace patterns; `None` serves the cluster.
    pub(super) namespaces: Option<Vec<String>>,
    /// `-A` was given (else a missing `-n` is warned about, as Kopf does).
    pub(super) clusterwide: bool,
    /// The tracing filter; `None` uses `RUST_LOG`, else INFO.
    pub(super) filter: Option<&'static str>,
    /// How log lines look.
    pub(super) style: LogStyle,
    /// The liveness endpoint's URL, if any.
    pub(super) liveness: Option<String>,
    /// The metrics endpoint's URL, if any.
    pub(super) metrics: Option<String>,
    /// The mandatory peering's name (`-P`), if any.
    pub(super) peering: Option<String>,
    /// The peering priority (`-p`, or 666 for `--dev`), if given.
    pub(super) priority: Option<i64>,
    /// No peering at all (`--standalone`).
    pub(super) standalone: bool,
    /// The Lease to elect a leader with (`--lease`), if any.
    pub(super) lease: Option<LeaseName>,
    /// The number of assigned shards (`--shards`), if any.
    pub(super) shards: Option<u32>,
    /// The admission webhook server (`--webhook-server`, `--webhook-host`), if any.
    pub(super) webhook_server: Option<WebhookServer>,
    /// The managed webhook configurations' name (`--admission-managed`), if any.
    pub(super) admission_managed: Option<String>,
}

/// Completes the options from the environment as Kopf's click CLI does
/// (`auto_envvar_prefix='KOPF'`: the command line wins; `KOPF_RUN_NAMESPACE` is appended).
pub(super) fn resolve(
    args: RunArgs,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Options, clap::Error> {
    resolve_as("KOPF_RUN_", args, env)
}

/// As [`resolve`], with the variables of a subcommand: `prefix` is `KOPF_RUN_`,
/// `KOPF_FREEZE_` or `KOPF_RESUME_` (click's `auto_envvar_prefix` and the command's name).
pub(super) fn resolve_as(
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
pub(super) const DEV_PRIORITY: i64 = 666;

/// `-v`: DEBUG, but not the client libraries' internals (Kopf leaves out asyncio's and
/// aiohttp's).
pub(super) const VERBOSE: &str = "debug,hyper=info,hyper_util=info,h2=info,tower=info,rustls=info,kube_client=info,kube_runtime=info";

/// A boolean as click reads one from the environment.
pub(super) fn parse_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" | "on" => Some(true),
        "0" | "false" | "f" | "no" | "n" | "off" => Some(false),
        _ => None,
    }
}
