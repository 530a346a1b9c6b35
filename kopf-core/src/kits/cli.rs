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
use std::fmt::{self, Write as _};
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer};

use crate::kits::manifests;
use crate::reactor::operator::{Operator, OperatorError};
use crate::intents::registry::Registry;

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
        Some(Command::Run(args)) => args,
        None => cli.run,
    };
    let options = match resolve(args, |name| std::env::var(name).ok()) {
        Ok(options) => options,
        Err(error) => return usage_exit(&error),
    };
    init_logging(&options);
    let mut operator = Operator::new(registry);
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

/// Prints a usage error and returns its exit code (0 for `--help`, else 2).
fn usage_exit(error: &clap::Error) -> ExitCode {
    let _ = error.print();
    ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2))
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
    } = args;
    let run = RunArgs {
        namespaces,
        all_namespaces,
        ..RunArgs::default()
    };
    let options = resolve(run, env)?;
    let options = manifests::RbacOptions {
        namespaces: options.namespaces,
        service_account,
        service_account_namespace,
        with_service_account: !no_service_account,
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
            Some(Command::Crd | Command::Rbac(_)) => panic!("not a run"),
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
  KOPF_RUN_LIVENESS        as -L
  KOPF_RUN_METRICS         as --metrics
  RUST_LOG                 a tracing filter, used when none of -v, -d, -q is given
  KUBECONFIG               the kubeconfig files (else ~/.kube/config, else in-cluster)";

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the operator and handle the objects until SIGINT or SIGTERM (the default).
    #[command(after_help = ENVIRONMENT)]
    Run(RunArgs),
    /// Print the CRDs of the typed custom resources, as YAML.
    ///
    /// The CRDs are those that the program declares with `Registry::crd::<K>()`.
    Crd,
    /// Print the RBAC that the handlers need, as YAML.
    ///
    /// A ServiceAccount, a ClusterRole (and a Role per namespace when -n gives plain names)
    /// and their bindings.
    #[command(after_help = RBAC_NOTE)]
    Rbac(RbacArgs),
}

const RBAC_NOTE: &str = "\
The RBAC is computed from the handlers, without a cluster. Resources given by a name that
discovery resolves (a short name, a kind, no group) are printed as given: check them.";

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
}

/// The options of `run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
struct RunArgs {
    /// Serve only this namespace: a name, a glob (`*`, `?`), a negation (`!name`), or a
    /// comma-separated list of them. Repeatable; the rightmost matching pattern wins.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "PATTERN",
        conflicts_with = "all_namespaces"
    )]
    namespaces: Vec<String>,
    /// Serve all namespaces and the cluster-scoped resources.
    #[arg(short = 'A', long = "all-namespaces")]
    all_namespaces: bool,
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
    /// Serve the liveness endpoint at this URL (e.g. http://0.0.0.0:8080/healthz): GET answers
    /// with the probe handlers' results as JSON. GET /readyz on the same host and port answers
    /// 200 once every resource has been listed.
    #[arg(short = 'L', long, value_name = "URL", value_parser = crate::engines::probing::check_url)]
    liveness: Option<String>,
    /// Serve Prometheus metrics at this URL (e.g. http://0.0.0.0:9090/metrics): handler
    /// invocations, durations and errors, watch events, workers and queue depth, API requests.
    #[arg(long, value_name = "URL", value_parser = crate::engines::metrics::check_url)]
    metrics: Option<String>,
}

/// The log formats of `--log-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// `[namespace/name] message`.
    Plain,
    /// `[time] target [LEVEL] [namespace/name] message`.
    #[default]
    Full,
    /// `{"message": ..., "timestamp": ..., "severity": ..., "object": {...}}`.
    Json,
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
    format: LogFormat,
    /// The liveness endpoint's URL, if any.
    liveness: Option<String>,
    /// The metrics endpoint's URL, if any.
    metrics: Option<String>,
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
    let mut command = Cli::command().bin_name(name);
    let matches = command.try_get_matches_from_mut(args)?;
    Cli::from_arg_matches(&matches).map_err(|error| error.format(&mut command))
}

/// Completes the options from the environment as Kopf's click CLI does
/// (`auto_envvar_prefix='KOPF'`: the command line wins; `KOPF_RUN_NAMESPACE` is appended).
fn resolve(args: RunArgs, env: impl Fn(&str) -> Option<String>) -> Result<Options, clap::Error> {
    let env = |name: &str| env(name).filter(|value| !value.is_empty());
    let flag = |given: bool, name: &str| -> Result<bool, clap::Error> {
        if given {
            return Ok(true);
        }
        match env(name) {
            None => Ok(false),
            Some(value) => match value.to_ascii_lowercase().as_str() {
                "1" | "true" | "t" | "yes" | "y" | "on" => Ok(true),
                "0" | "false" | "f" | "no" | "n" | "off" => Ok(false),
                _ => Err(usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("{name}={value:?} is not a valid boolean"),
                )),
            },
        }
    };
    let mut namespaces = args.namespaces;
    if namespaces.is_empty()
        && let Some(value) = env("KOPF_RUN_NAMESPACES")
    {
        namespaces.extend(value.split_whitespace().map(String::from));
    }
    if let Some(value) = env("KOPF_RUN_NAMESPACE") {
        namespaces.push(value);
    }
    let clusterwide = flag(args.all_namespaces, "KOPF_RUN_CLUSTERWIDE")?;
    if clusterwide && !namespaces.is_empty() {
        return Err(usage(
            clap::error::ErrorKind::ArgumentConflict,
            "Either --namespace or --all-namespaces can be used, not both.".to_string(),
        ));
    }
    let verbose = flag(args.verbose, "KOPF_RUN_VERBOSE")?;
    let debug = flag(args.debug, "KOPF_RUN_DEBUG")?;
    let quiet = flag(args.quiet, "KOPF_RUN_QUIET")?;
    let format = match args.log_format {
        Some(format) => format,
        None => match env("KOPF_RUN_LOG_FORMAT") {
            None => LogFormat::default(),
            Some(value) => LogFormat::from_str(&value, true).map_err(|_| {
                usage(
                    clap::error::ErrorKind::InvalidValue,
                    format!("KOPF_RUN_LOG_FORMAT={value:?} is not one of plain, full, json"),
                )
            })?,
        },
    };
    let liveness = match args.liveness {
        Some(url) => Some(url),
        None => env("KOPF_RUN_LIVENESS")
            .map(|url| {
                crate::engines::probing::check_url(&url).map_err(|error| {
                    usage(
                        clap::error::ErrorKind::InvalidValue,
                        format!("KOPF_RUN_LIVENESS={url:?} is not a liveness URL: {error}"),
                    )
                })
            })
            .transpose()?,
    };
    let metrics = match args.metrics {
        Some(url) => Some(url),
        None => env("KOPF_RUN_METRICS")
            .map(|url| {
                crate::engines::metrics::check_url(&url)
                    .map_err(|error| usage(clap::error::ErrorKind::InvalidValue, error.to_string()))
            })
            .transpose()?,
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
        format,
        liveness,
        metrics,
    })
}

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

/// Installs the subscriber, unless the program has installed one.
fn init_logging(options: &Options) {
    let filter = match options.filter {
        Some(filter) => EnvFilter::new(filter),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    let _already_installed = tracing_subscriber::registry()
        .with(filter)
        .with(SpanFields)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(KopfFormat(options.format)),
        )
        .try_init();
}

/// A layer that keeps each span's fields as JSON, for the formatter to find an event's object.
#[derive(Debug)]
struct SpanFields;

/// The fields of a span, in its extensions.
#[derive(Debug, Default)]
struct Fields(Map<String, Value>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanFields {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut fields = Fields::default();
            attrs.record(&mut fields);
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            if let Some(fields) = extensions.get_mut::<Fields>() {
                values.record(fields);
            }
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            Value::String(format!("{value:?}")),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_string(), Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), value.into());
    }
}

/// Kopf's log formats, for `tracing`.
#[derive(Debug, Clone, Copy)]
struct KopfFormat(LogFormat);

impl<S, N> FormatEvent<S, N> for KopfFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // The spans' fields, outermost first, then the event's own.
        let mut context = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<Fields>() {
                    context.extend(fields.0.clone());
                }
            }
        }
        let mut own = Fields::default();
        event.record(&mut own);
        let message = match own.0.remove("message") {
            Some(Value::String(message)) => message,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let name = context.remove("object.name");
        let namespace = context.remove("object.namespace");
        let metadata = event.metadata();
        let now = time::OffsetDateTime::now_utc();
        if self.0 == LogFormat::Json {
            let mut line = Map::new();
            line.insert("message".into(), message.into());
            let timestamp = now
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            line.insert("timestamp".into(), timestamp.into());
            line.insert("severity".into(), severity(metadata.level()).into());
            line.insert("target".into(), metadata.target().into());
            if let Some(name) = name {
                let mut object = Map::new();
                object.insert("name".into(), name);
                if let Some(namespace) = namespace.filter(|n| !n.is_null()) {
                    object.insert("namespace".into(), namespace);
                }
                line.insert("object".into(), object.into());
            }
            line.extend(context);
            line.extend(own.0);
            return writeln!(writer, "{}", Value::Object(line));
        }
        if self.0 == LogFormat::Full {
            let format = time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second],[subsecond digits:3]"
            );
            let timestamp = now.format(&format).unwrap_or_default();
            let level = severity(metadata.level()).to_uppercase();
            write!(
                writer,
                "[{timestamp}] {:<20.20} [{level:<8.8}] ",
                metadata.target()
            )?;
        }
        let text = |value: &Value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        match (name.as_ref(), namespace.as_ref().filter(|n| !n.is_null())) {
            (Some(name), Some(namespace)) => {
                write!(writer, "[{}/{}] ", text(namespace), text(name))?
            }
            (Some(name), None) => write!(writer, "[{}] ", text(name))?,
            _ => {}
        }
        let mut line = message;
        for (key, value) in &own.0 {
            let _ = write!(line, " {key}={}", text(value));
        }
        writeln!(writer, "{line}")
    }
}

/// Kopf's (Python's) level names.
fn severity(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        _ => "debug",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(args: &[&str], env: &[(&str, &str)]) -> Result<Options, clap::Error> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cli = parse_from(std::iter::once("my-operator").chain(args.iter().copied()))?;
        resolve(cli.args(), |name| {
            env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn run_is_the_default_subcommand() {
        let plain = options(&["-n", "default", "-n", "kube-*,!kube-system", "-v"], &[]).unwrap();
        let explicit = options(
            &[
                "run",
                "-n",
                "default",
                "--namespace=kube-*,!kube-system",
                "--verbose",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(plain, explicit);
        assert_eq!(
            plain.namespaces,
            Some(vec![
                "default".to_string(),
                "kube-*,!kube-system".to_string()
            ])
        );
        assert_eq!(plain.filter, Some(VERBOSE));
        assert_eq!(plain.format, LogFormat::Full);
        assert!(!plain.clusterwide);
    }

    #[test]
    fn neither_namespaces_nor_all_serves_the_cluster() {
        let options = options(&[], &[]).unwrap();
        assert_eq!(options.namespaces, None);
        assert!(!options.clusterwide);
        assert_eq!(options.filter, None);
        let all = super::tests::options(&["-A", "--log-format", "json", "-q"], &[]).unwrap();
        assert!(all.clusterwide);
        assert_eq!(all.format, LogFormat::Json);
        assert_eq!(all.filter, Some("warn"));
    }

    #[test]
    fn debug_and_verbose_beat_quiet() {
        assert_eq!(options(&["-q", "-d"], &[]).unwrap().filter, Some("debug"));
        assert_eq!(options(&["-qv"], &[]).unwrap().filter, Some(VERBOSE));
    }

    #[test]
    fn namespaces_and_all_namespaces_conflict() {
        let error = options(&["-n", "default", "-A"], &[]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert_eq!(error.exit_code(), 2);
        let error = options(&["-A"], &[("KOPF_RUN_NAMESPACE", "default")]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        let error = options(&["-n", "x"], &[("KOPF_RUN_CLUSTERWIDE", "true")]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
    }

    #[test]
    fn bad_arguments_exit_with_2() {
        for args in [
            &["--log-format", "xml"][..],
            &["--liveness", "http://:8080/"],
            &["-P", "x"],
        ] {
            let error = options(args, &[]).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{args:?}");
        }
        assert_eq!(options(&["--help"], &[]).unwrap_err().exit_code(), 0);
    }

    #[test]
    fn metrics_from_the_command_line_or_the_environment() {
        let url = "http://0.0.0.0:9090/metrics";
        assert_eq!(
            options(&["--metrics", url], &[])
                .unwrap()
                .metrics
                .as_deref(),
            Some(url)
        );
        let from_env = options(&[], &[("KOPF_RUN_METRICS", url)]).unwrap();
        assert_eq!(from_env.metrics.as_deref(), Some(url));
        assert_eq!(options(&[], &[]).unwrap().metrics, None);
        let bad = options(&[], &[("KOPF_RUN_METRICS", "https://0.0.0.0:9090/")]).unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        let bad = options(&["--metrics", "0.0.0.0:9090"], &[]).unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        assert!(bad.to_string().contains("http://HOST:PORT/PATH"), "{bad}");
    }

    #[test]
    fn liveness_from_the_command_line_or_the_environment() {
        let url = "http://0.0.0.0:8080/healthz";
        assert_eq!(
            options(&["-L", url], &[]).unwrap().liveness.as_deref(),
            Some(url)
        );
        let from_env = options(&[], &[("KOPF_RUN_LIVENESS", url)]).unwrap();
        assert_eq!(from_env.liveness.as_deref(), Some(url));
        let given = options(
            &["--liveness=http://127.0.0.1:9/x"],
            &[("KOPF_RUN_LIVENESS", url)],
        );
        assert_eq!(
            given.unwrap().liveness.as_deref(),
            Some("http://127.0.0.1:9/x")
        );
        assert_eq!(options(&[], &[]).unwrap().liveness, None);
        let bad = options(&[], &[("KOPF_RUN_LIVENESS", "https://0.0.0.0:8080/")]).unwrap_err();
        assert_eq!(bad.exit_code(), 2);
        assert_eq!(
            options(&["-L", "ftp://x/"], &[]).unwrap_err().exit_code(),
            2
        );
    }

    #[test]
    fn environment_variables_as_kopfs_click_cli() {
        let env = [
            ("KOPF_RUN_NAMESPACES", "ns1  ns2-*"),
            ("KOPF_RUN_NAMESPACE", "legacy"),
            ("KOPF_RUN_VERBOSE", "yes"),
            ("KOPF_RUN_LOG_FORMAT", "PLAIN"),
        ];
        let options = options(&[], &env).unwrap();
        assert_eq!(
            options.namespaces,
            Some(vec!["ns1".into(), "ns2-*".into(), "legacy".into()])
        );
        assert_eq!(options.filter, Some(VERBOSE));
        assert_eq!(options.format, LogFormat::Plain);
        // The command line wins over the environment (the legacy variable is still added).
        let given = super::tests::options(&["-n", "cli", "--log-format=json"], &env).unwrap();
        assert_eq!(given.namespaces, Some(vec!["cli".into(), "legacy".into()]));
        assert_eq!(given.format, LogFormat::Json);
        // Flags off, empty values ignored, nonsense refused.
        let off = super::tests::options(
            &[],
            &[("KOPF_RUN_CLUSTERWIDE", "0"), ("KOPF_RUN_QUIET", "")],
        )
        .unwrap();
        assert!(!off.clusterwide);
        assert_eq!(off.filter, None);
        let on = super::tests::options(&[], &[("KOPF_RUN_CLUSTERWIDE", "on")]).unwrap();
        assert!(on.clusterwide);
        let bad = super::tests::options(&[], &[("KOPF_RUN_DEBUG", "maybe")]).unwrap_err();
        assert_eq!(bad.exit_code(), 2);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(Ok(())), ExitCode::SUCCESS);
        assert_eq!(
            exit_code(Err(OperatorError::Interrupted)),
            ExitCode::from(130)
        );
        assert_eq!(
            exit_code(Err(OperatorError::Namespaces("x".into()))),
            ExitCode::FAILURE
        );
    }

    #[test]
    fn crd_and_rbac_subcommands() {
        let cli = parse_from(["my-operator", "crd"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Crd)));
        let registry = Registry::new().with(crate::ChangeHandler::on_create(
            crate::Selector::new("kopf.dev", "v1", "kopfexamples"),
            "create_fn",
            |_| async { Ok(None) },
        ));
        let rbac_of = |args: &[&str], env: &[(&str, &str)]| {
            let cli = parse_from(["my-operator", "rbac"].iter().chain(args)).unwrap();
            let Some(Command::Rbac(args)) = cli.command else {
                panic!("not rbac: {cli:?}");
            };
            let env: Vec<(String, String)> = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            rbac(&registry, args, |name| {
                env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })
        };
        let documents = |text: String| -> Vec<Value> {
            text.split("\n---\n")
                .skip(1)
                .map(|doc| serde_norway::from_str(doc).unwrap())
                .collect()
        };
        let all = documents(rbac_of(&["-A"], &[]).unwrap());
        let kinds: Vec<&Value> = all.iter().map(|d| &d["kind"]).collect();
        assert_eq!(
            kinds,
            ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]
        );
        assert_eq!(all[0]["metadata"]["name"], "kopf-operator");
        let named = documents(
            rbac_of(
                &[
                    "-n",
                    "ns1",
                    "--service-account=op",
                    "--service-account-namespace",
                    "ops",
                    "--no-service-account",
                ],
                &[],
            )
            .unwrap(),
        );
        let kinds: Vec<&Value> = named.iter().map(|d| &d["kind"]).collect();
        assert_eq!(
            kinds,
            ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
        );
        assert_eq!(
            named[2]["metadata"],
            serde_json::json!({"name": "op", "namespace": "ns1"})
        );
        assert_eq!(
            named[3]["subjects"],
            serde_json::json!([{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}])
        );
        assert_eq!(
            named[2]["rules"][0]["resources"],
            serde_json::json!(["kopfexamples"])
        );
        // Kopf's environment variables too; bad patterns are usage errors.
        let from_env = documents(rbac_of(&[], &[("KOPF_RUN_NAMESPACE", "ns2")]).unwrap());
        assert_eq!(from_env[3]["metadata"]["namespace"], "ns2");
        assert_eq!(rbac_of(&["-n", "a,,b"], &[]).unwrap_err().exit_code(), 2);
        assert_eq!(
            parse_from(["my-operator", "rbac", "-n", "x", "-A"])
                .unwrap_err()
                .exit_code(),
            2
        );
    }

    /// The `--help` text, compared with `tests/cli_help.txt`; run with `KOPF_UPDATE_HELP=1`
    /// to rewrite that file after an intended change.
    #[test]
    fn help_snapshot() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli_help.txt");
        let top = parse_from(["my-operator", "--help"]).unwrap_err();
        let run = parse_from(["my-operator", "run", "--help"]).unwrap_err();
        let rbac = parse_from(["my-operator", "rbac", "--help"]).unwrap_err();
        let actual = format!(
            "$ my-operator --help\n{}\n$ my-operator run --help\n{}\n$ my-operator rbac --help\n{}",
            top.render(),
            run.render(),
            rbac.render()
        );
        if std::env::var_os("KOPF_UPDATE_HELP").is_some() {
            std::fs::write(path, &actual).unwrap();
        }
        let expected = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            actual, expected,
            "--help changed; if intended, rerun with KOPF_UPDATE_HELP=1"
        );
    }

    #[test]
    fn the_formats() {
        use std::sync::{Arc, Mutex};

        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(data);
                Ok(data.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = |format: LogFormat| {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let subscriber = tracing_subscriber::registry().with(SpanFields).with(
                tracing_subscriber::fmt::layer()
                    .with_writer(move || writer.clone())
                    .event_format(KopfFormat(format)),
            );
            tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!(
                    "handler",
                    handler.id = "create_fn",
                    object.name = "one",
                    object.namespace = "ns"
                );
                tracing::info!(target: "kopf::objects", parent: &span, "Handler 'create_fn' succeeded.");
                tracing::warn!(target: "kopf::operator", tasks = 2, "outside");
            });
            String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
        };
        assert_eq!(
            lines(LogFormat::Plain),
            "[ns/one] Handler 'create_fn' succeeded.\noutside tasks=2\n"
        );
        let full = lines(LogFormat::Full);
        let first = full.lines().next().unwrap();
        assert!(first.starts_with('['), "{full}");
        assert!(
            first.ends_with(
                "] kopf::objects        [INFO    ] [ns/one] Handler 'create_fn' succeeded."
            ),
            "{full}"
        );
        let json = lines(LogFormat::Json);
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(first["message"], "Handler 'create_fn' succeeded.");
        assert_eq!(first["severity"], "info");
        assert_eq!(
            first["object"],
            serde_json::json!({"name": "one", "namespace": "ns"})
        );
        assert_eq!(first["handler.id"], "create_fn");
        let second: Value = serde_json::from_str(json.lines().nth(1).unwrap()).unwrap();
        assert_eq!(second["severity"], "warning");
        assert_eq!(second["tasks"], 2);
    }
}
