//! The command line's tests: parsing, the environment, exit codes, subcommands, `--help`.

use serde_json::Value;

use super::arguments::*;
use super::options::*;
use super::*;
use crate::configs::webhooks::WebhookServer;
use crate::kits::logging::LogFormat;

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
    assert_eq!(plain.style.format, LogFormat::Full);
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
    assert_eq!(all.style.format, LogFormat::Json);
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
        &["-p", "high"],
        &["--dev", "-p", "5"],
        &["--standalone", "-P", "x"],
        &["-P"],
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
    assert_eq!(options.style.format, LogFormat::Plain);
    // The command line wins over the environment (the legacy variable is still added).
    let given = super::tests::options(&["-n", "cli", "--log-format=json"], &env).unwrap();
    assert_eq!(given.namespaces, Some(vec!["cli".into(), "legacy".into()]));
    assert_eq!(given.style.format, LogFormat::Json);
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
fn peering_options_from_the_command_line_or_the_environment() {
    let none = options(&[], &[]).unwrap();
    assert_eq!(
        (none.peering, none.priority, none.standalone),
        (None, None, false)
    );
    let given = options(&["-P", "team", "-p", "-5"], &[]).unwrap();
    assert_eq!(given.peering.as_deref(), Some("team"));
    assert_eq!(given.priority, Some(-5));
    let long = options(&["--peering=team", "--priority", "10"], &[]).unwrap();
    assert_eq!(
        (long.peering.as_deref(), long.priority),
        (Some("team"), Some(10))
    );
    assert_eq!(options(&["--dev"], &[]).unwrap().priority, Some(666));
    assert!(options(&["--standalone"], &[]).unwrap().standalone);
    let env = [
        ("KOPF_RUN_PEERING", "from-env"),
        ("KOPF_RUN_PRIORITY", "3"),
        ("KOPF_RUN_STANDALONE", "yes"),
    ];
    let from_env = options(&[], &env).unwrap();
    assert_eq!(from_env.peering.as_deref(), Some("from-env"));
    assert_eq!(from_env.priority, Some(3));
    assert!(from_env.standalone);
    // The command line wins; --dev beats the environment's priority.
    let cli = options(&["-P", "cli", "--dev"], &env).unwrap();
    assert_eq!(
        (cli.peering.as_deref(), cli.priority),
        (Some("cli"), Some(666))
    );
    let dev = options(&[], &[("KOPF_RUN_DEV", "1")]).unwrap();
    assert_eq!(dev.priority, Some(666));
    let bad = options(&[], &[("KOPF_RUN_PRIORITY", "high")]).unwrap_err();
    assert_eq!(bad.exit_code(), 2);
    let bad = options(&[], &[("KOPF_RUN_DEV", "maybe")]).unwrap_err();
    assert_eq!(bad.exit_code(), 2);
}

#[test]
fn a_lease_from_the_command_line_or_the_environment_implies_standalone() {
    assert_eq!(options(&[], &[]).unwrap().lease, None);
    let named = options(&["--lease", "ops/my-operator"], &[]).unwrap();
    assert_eq!(
        named.lease,
        Some(LeaseName {
            namespace: Some("ops".into()),
            name: "my-operator".into()
        })
    );
    assert!(named.standalone, "no Kopf peering beside the Lease");
    let from_env = options(&[], &[("KOPF_RUN_LEASE", "my-operator")]).unwrap();
    assert_eq!(
        from_env.lease,
        Some(LeaseName {
            namespace: None,
            name: "my-operator".into()
        })
    );
    for bad in ["", "a/b/c", "Upper", "ns/", "/name"] {
        let error = parse_from(["my-operator", "--lease", bad]).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{bad:?}");
    }
    let error = options(&[], &[("KOPF_RUN_LEASE", "a b")]).unwrap_err();
    assert_eq!(error.exit_code(), 2);
    for conflicting in [&["-P", "team"][..], &["-p", "5"], &["--dev"]] {
        let args = ["my-operator", "--lease", "x"].iter().chain(conflicting);
        assert_eq!(
            parse_from(args).unwrap_err().exit_code(),
            2,
            "{conflicting:?}"
        );
    }
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
    let registry = Registry::new().with(crate::intents::handlers::ChangeHandler::on_create(
        crate::structs::resources::Selector::new("kopf.dev", "v1", "kopfexamples"),
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
    // The Lease of `run --lease`: a Role of its own in its namespace, or the account's.
    let leased = documents(rbac_of(&["-A", "--lease", "my-operator"], &[]).unwrap());
    let kinds: Vec<&Value> = leased.iter().map(|d| &d["kind"]).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding"
        ]
    );
    assert_eq!(
        leased[3]["metadata"],
        serde_json::json!({"name": "kopf-operator-leader-election", "namespace": "default"})
    );
    assert_eq!(
        leased[3]["rules"],
        serde_json::json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["my-operator"], "verbs": ["get", "update"]},
        ])
    );
    assert_eq!(
        leased[4]["roleRef"]["name"],
        "kopf-operator-leader-election"
    );
    let elsewhere = documents(rbac_of(&["-A", "--lease", "ops/my-operator"], &[]).unwrap());
    assert_eq!(elsewhere[3]["metadata"]["namespace"], "ops");
    // The Leases of `run --shards N`: a Role in the account's namespace, any name.
    for args in [&["-A", "--shards"][..], &["-A", "--shards", "16"]] {
        let sharded = documents(rbac_of(args, &[]).unwrap());
        assert_eq!(
            sharded[3]["metadata"],
            serde_json::json!({"name": "kopf-operator-shards", "namespace": "default"})
        );
        assert_eq!(
            sharded[3]["rules"],
            serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                "verbs": ["get", "list", "watch", "create", "update", "delete"]}])
        );
        assert_eq!(sharded[4]["roleRef"]["name"], "kopf-operator-shards");
    }
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

fn marking(args: &[&str], env: &[(&str, &str)]) -> Result<Marking, clap::Error> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let cli = parse_from(std::iter::once("my-operator").chain(args.iter().copied()))?;
    match cli.command {
        Some(Command::Freeze(args)) => resolve_freeze(args, env),
        Some(Command::Resume(args)) => resolve_mark("KOPF_RESUME_", args.target, Mark::Resume, env),
        _ => panic!("neither freeze nor resume"),
    }
}

fn frozen(priority: i64, seconds: u64) -> Mark {
    Mark::Freeze {
        priority,
        lifetime: Duration::from_secs(seconds),
    }
}

#[test]
fn freeze_and_resume_take_kopfs_options() {
    let freeze = marking(
        &[
            "freeze",
            "-P",
            "default",
            "-t",
            "60",
            "-n",
            "ns1",
            "-i",
            "me",
            "-m",
            "maintenance",
        ],
        &[],
    )
    .unwrap();
    assert_eq!(freeze.mark, frozen(FREEZE_PRIORITY, 60));
    assert_eq!(freeze.peering, "default");
    assert_eq!(freeze.options.namespaces, Some(vec!["ns1".to_string()]));
    assert_eq!(freeze.id.as_deref(), Some("me"));
    let missing = marking(&["freeze", "-P", "default"], &[]).unwrap_err();
    assert_eq!(
        missing.exit_code(),
        2,
        "the lifetime is required, as in Kopf"
    );
    assert!(
        missing.to_string().contains("KOPF_FREEZE_LIFETIME"),
        "{missing}"
    );
    let dev = marking(&["freeze", "-P", "x", "-t", "1", "-p", "5", "--dev"], &[]).unwrap();
    assert_eq!(
        dev.mark,
        frozen(DEV_PRIORITY, 1),
        "--dev wins over -p, as in Kopf"
    );

    let resume = marking(&["resume", "-P", "default", "-A"], &[]).unwrap();
    assert!(resume.options.clusterwide);
    assert_eq!((resume.mark, resume.id), (Mark::Resume, None));
    let missing = marking(&["resume"], &[]).unwrap_err();
    assert_eq!(
        missing.exit_code(),
        2,
        "the peering is required, as in Kopf"
    );
}

/// Kopf's click CLI reads `KOPF_FREEZE_*` and `KOPF_RESUME_*` (`auto_envvar_prefix` and the
/// command's name; `-P` by its explicit `envvar`) where the command line says nothing.
#[test]
fn freeze_and_resume_take_kopfs_environment_variables() {
    let env = [
        ("KOPF_FREEZE_PEERING", "from-env"),
        ("KOPF_FREEZE_LIFETIME", "30"),
        ("KOPF_FREEZE_PRIORITY", "7"),
        ("KOPF_FREEZE_ID", "someone"),
        ("KOPF_FREEZE_NAMESPACES", "ns1 ns2"),
        (
            "KOPF_FREEZE_LIVENESS",
            "not read: freeze has no such option",
        ),
        ("KOPF_RUN_PEERING", "not read either"),
    ];
    let freeze = marking(&["freeze"], &env).unwrap();
    assert_eq!(freeze.peering, "from-env");
    assert_eq!(freeze.mark, frozen(7, 30));
    assert_eq!(freeze.id.as_deref(), Some("someone"));
    assert_eq!(
        freeze.options.namespaces,
        Some(vec!["ns1".to_string(), "ns2".to_string()])
    );
    assert_eq!(freeze.options.liveness, None);
    let given = marking(
        &["freeze", "-P", "cli", "-t", "5", "-p", "1", "-i", "me"],
        &env,
    )
    .unwrap();
    assert_eq!(
        (given.peering.as_str(), given.mark),
        ("cli", frozen(1, 5)),
        "the command line wins"
    );
    assert_eq!(given.id.as_deref(), Some("me"));
    let dev = marking(&["freeze"], &[env[0], env[1], ("KOPF_FREEZE_DEV", "yes")]).unwrap();
    assert_eq!(dev.mark, frozen(DEV_PRIORITY, 30));
    let bad = marking(&["freeze"], &[env[0], ("KOPF_FREEZE_LIFETIME", "soon")]).unwrap_err();
    assert!(
        bad.to_string().contains("KOPF_FREEZE_LIFETIME=\"soon\""),
        "{bad}"
    );
    let bad = marking(
        &["freeze", "-t", "1"],
        &[env[0], ("KOPF_FREEZE_VERBOSE", "maybe")],
    )
    .unwrap_err();
    assert!(
        bad.to_string().contains("KOPF_FREEZE_VERBOSE"),
        "named as set: {bad}"
    );

    let env = [
        ("KOPF_RESUME_PEERING", "from-env"),
        ("KOPF_RESUME_CLUSTERWIDE", "1"),
        ("KOPF_RESUME_ID", "someone"),
        ("KOPF_FREEZE_PEERING", "not read"),
    ];
    let resume = marking(&["resume"], &env).unwrap();
    assert_eq!(resume.peering, "from-env");
    assert!(resume.options.clusterwide);
    assert_eq!(resume.id.as_deref(), Some("someone"));
    assert!(
        marking(&["resume"], &env[3..]).is_err(),
        "KOPF_FREEZE_PEERING is not resume's"
    );
}

#[test]
fn python_modules_and_paths_are_refused_with_a_reason() {
    for args in [
        &["-m", "handlers"][..],
        &["handlers.py"][..],
        &["run", "-A", "x.py"][..],
    ] {
        let error = options(args, &[]).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{args:?}");
        let text = error.to_string();
        assert!(text.contains("compiled binary"), "{args:?}: {text}");
    }
}

#[test]
fn log_prefixes_and_refkeys_as_kopfs() {
    let default = options(&[], &[]).unwrap();
    assert_eq!((default.style.prefix, default.style.refkey), (None, None));
    let given = options(&["--no-log-prefix", "--log-refkey", "k8s"], &[]).unwrap();
    assert_eq!(given.style.prefix, Some(false));
    assert_eq!(given.style.refkey.as_deref(), Some("k8s"));
    let last_wins = options(&["--no-log-prefix", "--log-prefix"], &[]).unwrap();
    assert_eq!(last_wins.style.prefix, Some(true));
    let env = [
        ("KOPF_RUN_LOG_PREFIX", "no"),
        ("KOPF_RUN_LOG_REFKEY", "ref"),
    ];
    let from_env = options(&[], &env).unwrap();
    assert_eq!(from_env.style.prefix, Some(false));
    assert_eq!(from_env.style.refkey.as_deref(), Some("ref"));
}

#[test]
fn the_version_names_kopf_rs() {
    let error = parse_from(["my-operator", "--version"]).unwrap_err();
    assert_eq!(error.exit_code(), 0);
    let text = error.to_string();
    assert!(
        text.contains(concat!("kopf-rs ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}

#[test]
fn webhook_options_from_the_command_line_or_the_environment() {
    let given = options(
        &[
            "--webhook-server",
            "https://0.0.0.0:9443/hooks",
            "--webhook-host",
            "host.k3d.internal",
            "--admission-managed",
            "auto.kopf.dev",
        ],
        &[],
    )
    .unwrap();
    let expected = WebhookServer::new()
        .addr("0.0.0.0".parse().unwrap())
        .port(9443)
        .path("/hooks")
        .host("host.k3d.internal");
    assert_eq!(given.webhook_server, Some(expected));
    assert_eq!(given.admission_managed.as_deref(), Some("auto.kopf.dev"));
    let from_env = options(
        &[],
        &[
            ("KOPF_RUN_WEBHOOK_SERVER", "https://127.0.0.1"),
            ("KOPF_RUN_ADMISSION_MANAGED", "auto.kopf.dev"),
        ],
    )
    .unwrap();
    let server = from_env.webhook_server.unwrap();
    assert_eq!(
        (server.port, server.reported_host()),
        (None, "127.0.0.1".to_string())
    );
    assert_eq!(from_env.admission_managed.as_deref(), Some("auto.kopf.dev"));
    assert_eq!(options(&[], &[]).unwrap().webhook_server, None);
    let plain = options(&["--webhook-server", "http://0.0.0.0:8080"], &[]).unwrap();
    assert!(
        plain.webhook_server.unwrap().insecure,
        "http:// serves plain HTTP (Kopf's insecure)"
    );
    for bad in [
        options(&["--webhook-server", "ftp://0.0.0.0:9443"], &[]),
        options(&[], &[("KOPF_RUN_WEBHOOK_SERVER", "https://localhost")]),
        options(&["--webhook-host", "h"], &[]),
        options(&["--webhook-secret", "ops/tls"], &[]),
        options(
            &[
                "--webhook-server",
                "https://0.0.0.0",
                "--webhook-secret",
                "Ops/tls",
            ],
            &[],
        ),
    ] {
        assert_eq!(bad.unwrap_err().exit_code(), 2);
    }

    // A Secret shared by the replicas: in its namespace, or the client's default one.
    let shared = options(
        &[
            "--webhook-server",
            "https://0.0.0.0",
            "--webhook-secret",
            "ops/tls",
        ],
        &[],
    )
    .unwrap();
    let secret = shared.webhook_server.unwrap().secret.unwrap();
    assert_eq!(
        (secret.namespace.as_str(), secret.name.as_str()),
        ("ops", "tls")
    );
    let from_env = options(
        &[],
        &[
            ("KOPF_RUN_WEBHOOK_SERVER", "https://0.0.0.0"),
            ("KOPF_RUN_WEBHOOK_SECRET", "tls"),
        ],
    )
    .unwrap();
    let secret = from_env.webhook_server.unwrap().secret.unwrap();
    assert_eq!(
        (secret.namespace.as_str(), secret.name.as_str()),
        ("", "tls")
    );
}

#[test]
fn shards_from_the_command_line_or_the_environment() {
    assert_eq!(options(&[], &[]).unwrap().shards, None);
    assert_eq!(options(&["--shards", "16"], &[]).unwrap().shards, Some(16));
    assert_eq!(
        options(&[], &[("KOPF_RUN_SHARDS", "8")]).unwrap().shards,
        Some(8)
    );
    for bad in ["0", "-1", "x", "5000"] {
        let error = parse_from(["my-operator", "--shards", bad]).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{bad:?}");
        let error = options(&[], &[("KOPF_RUN_SHARDS", bad)]).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{bad:?}");
    }
}

#[test]
fn the_version_and_the_help_name_the_program() {
    let version = parse_from(["my-operator", "--version"]).unwrap_err();
    assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
    assert!(
        version
            .render()
            .to_string()
            .starts_with("my-operator (kopf-rs "),
        "{}",
        version.render()
    );
    let help = parse_from(["my-operator", "--help"]).unwrap_err();
    assert!(
        help.render().to_string().contains("Usage: my-operator"),
        "{}",
        help.render()
    );
}
