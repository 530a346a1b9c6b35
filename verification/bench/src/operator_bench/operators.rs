//! The three operators that do the same job, and how each is started.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster::ApiServer;
use crate::process::Process;

/// Who does the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `bench-kopf-rs-operator`.
    KopfRs,
    /// `bench-kopf-rs-operator` with the diff-base and the progress in `status`
    /// (`BENCH_STATUS_STORAGES=1`): one write per handled object.
    KopfRsStatus,
    /// Python Kopf running `bench/operators/kopf_operator.py`.
    Kopf,
    /// `bench-kube-rs-operator`.
    KubeRs,
    /// No operator: the runner writes what the handlers would, with no framework.
    Ceiling,
}

impl Kind {
    /// The column title.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Kind::KopfRs => "kopf-rs",
            Kind::KopfRsStatus => "kopf-rs, status storages",
            Kind::Kopf => "Kopf (Python)",
            Kind::KubeRs => "kube-rs Controller",
            Kind::Ceiling => "server ceiling",
        }
    }

    /// The name on the command line (`--operators`).
    pub(crate) fn parse(name: &str) -> Option<Kind> {
        match name {
            "kopf-rs" => Some(Kind::KopfRs),
            "kopf-rs-status" => Some(Kind::KopfRsStatus),
            "kopf" => Some(Kind::Kopf),
            "kube-rs" => Some(Kind::KubeRs),
            _ => None,
        }
    }
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub(crate) struct Programs {
    /// Which API server the scenarios start.
    pub(crate) apiserver: ApiServer,
    /// `kopf-fake-apiserver`.
    pub(crate) server: PathBuf,
    /// `scripts/real-apiserver`.
    pub(crate) real_server: PathBuf,
    /// Options every `kopf-fake-apiserver` is started with (none but the scenarios' own by
    /// default).
    pub(crate) server_options: Vec<String>,
    kopf_rs: PathBuf,
    kube_rs: PathBuf,
    python: PathBuf,
    script: PathBuf,
}

impl Programs {
    /// The binaries next to this one, and the virtualenv's python; the fake API server.
    pub(crate) fn find(python: PathBuf, root: &Path) -> Result<Programs, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
        let dir = exe.parent().expect("a binary lives in a directory");
        let programs = Programs {
            apiserver: ApiServer::Fake,
            server: dir.join("kopf-fake-apiserver"),
            real_server: root.join("scripts/real-apiserver"),
            server_options: Vec::new(),
            kopf_rs: dir.join("bench-kopf-rs-operator"),
            kube_rs: dir.join("bench-kube-rs-operator"),
            python,
            script: root.join("verification/bench/operators/kopf_operator.py"),
        };
        for binary in [&programs.server, &programs.kopf_rs, &programs.kube_rs] {
            if !binary.is_file() {
                return Err(format!(
                    "{} is missing: build everything first with\n  cargo build --release -p kopf-fake-apiserver -p kopf-bench --bins",
                    binary.display()
                ));
            }
        }
        Ok(programs)
    }

    /// The same programs, against `apiserver`.
    pub(crate) fn on(&self, apiserver: ApiServer) -> Programs {
        Programs {
            apiserver,
            ..self.clone()
        }
    }

    /// The same programs, with every fake API server started with `options` too.
    pub(crate) fn with_server_options(&self, options: &[&str]) -> Programs {
        let mut programs = self.clone();
        programs
            .server_options
            .extend(options.iter().map(|o| o.to_string()));
        programs
    }

    /// Starts kopf-rs or Python Kopf serving every namespace with these more `kopf run`
    /// options (and no others: Python Kopf without `--standalone` unless given) and
    /// environment variables (a replica that peers).
    pub(crate) fn start_replica(
        &self,
        kind: Kind,
        kubeconfig: &Path,
        mode: &str,
        run: &str,
        options: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Process, String> {
        let mut command = match kind {
            Kind::KopfRs | Kind::KopfRsStatus => Command::new(&self.kopf_rs),
            Kind::Kopf => {
                let mut command = Command::new(&self.python);
                command.args(["-m", "kopf", "run"]);
                command
            }
            Kind::KubeRs | Kind::Ceiling => unreachable!("only Kopf's kinds take Kopf's options"),
        };
        command.arg("--all-namespaces").args(options);
        if kind == Kind::Kopf {
            command.arg(&self.script);
        }
        command
            .envs(env.iter().copied())
            .env("KUBECONFIG", kubeconfig)
            .env("BENCH_MODE", mode)
            .env("BENCH_RUN", run)
            .env("RUST_LOG", "info")
            .env("PYTHONUNBUFFERED", "1");
        Process::spawn(kind.title(), command)
    }

    /// Starts an operator of this kind against the cluster of `kubeconfig`, with the handlers
    /// of `mode`, marking its writes with `run`; under `valgrind` if given (its arguments).
    pub(crate) fn start(
        &self,
        kind: Kind,
        kubeconfig: &Path,
        mode: &str,
        run: &str,
        valgrind: Option<&[String]>,
    ) -> Result<Process, String> {
        let (program, args): (&Path, Vec<String>) = match kind {
            Kind::KopfRs | Kind::KopfRsStatus => (&self.kopf_rs, vec!["--all-namespaces".into()]),
            Kind::KubeRs => (&self.kube_rs, vec![]),
            Kind::Kopf => (
                &self.python,
                vec![
                    "-m".into(),
                    "kopf".into(),
                    "run".into(),
                    "--standalone".into(),
                    "--all-namespaces".into(),
                    self.script.display().to_string(),
                ],
            ),
            Kind::Ceiling => unreachable!("the ceiling has no operator"),
        };
        let mut command = match valgrind {
            Some(valgrind) => {
                let mut command = Command::new("valgrind");
                command.args(valgrind).arg(program);
                command
            }
            None => Command::new(program),
        };
        if kind == Kind::KopfRsStatus {
            command.env("BENCH_STATUS_STORAGES", "1");
        }
        command
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("BENCH_MODE", mode)
            .env("BENCH_RUN", run)
            .env("RUST_LOG", "info")
            .env("PYTHONUNBUFFERED", "1");
        Process::spawn(kind.title(), command)
    }
}
