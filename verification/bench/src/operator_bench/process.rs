//! The processes under measurement, seen from outside: CPU time, memory, exit.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

/// A child process with its output drained by threads of its own. Dropped while it still
/// runs (a measurement that failed half-way), it is killed, so that it does not run on into
/// the next measurement.
pub(crate) struct Process {
    pid: rustix::process::Pid,
    exited: mpsc::Receiver<(Instant, ExitStatus)>,
    /// Its exit has been seen (and it has been reaped): its pid is no longer its own.
    ended: AtomicBool,
    started_lines: Arc<AtomicUsize>,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// When it was spawned (wall clock, to compare with the handlers' marks).
    pub(crate) spawned_at: SystemTime,
    /// What it is, for messages.
    pub(crate) label: String,
}

/// The line a busy handler prints when it starts.
const STARTED: &str = "BENCH-STARTED ";

impl Process {
    /// Starts `command` (its environment cleared of proxies: everything is local).
    pub(crate) fn spawn(label: &str, mut command: Command) -> Result<Process, String> {
        command
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawned_at = SystemTime::now();
        let child: Child = command
            .spawn()
            .map_err(|e| format!("cannot start {label} ({command:?}): {e}"))?;
        let mut process = Process::adopt(label, child);
        process.spawned_at = spawned_at;
        Ok(process)
    }

    /// Takes over a child process: drains what it prints (if piped) and waits for its exit.
    pub(crate) fn adopt(label: &str, mut child: Child) -> Process {
        let spawned_at = SystemTime::now();
        let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("a valid pid");
        let started_lines = Arc::new(AtomicUsize::new(0));
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let mut streams: Vec<Box<dyn std::io::Read + Send>> = Vec::new();
        if let Some(stdout) = child.stdout.take() {
            streams.push(Box::new(stdout));
        }
        if let Some(stderr) = child.stderr.take() {
            streams.push(Box::new(stderr));
        }
        for stream in streams {
            let (started_lines, tail) = (started_lines.clone(), tail.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if line.contains(STARTED) {
                        started_lines.fetch_add(1, Ordering::SeqCst);
                    }
                    let mut tail = tail.lock().expect("the tail's lock");
                    tail.push_back(line);
                    if tail.len() > 40 {
                        tail.pop_front();
                    }
                }
            });
        }
        let (sender, exited) = mpsc::channel();
        std::thread::spawn(move || {
            let status = child.wait().expect("the child's status");
            let _ = sender.send((Instant::now(), status));
        });
        Process {
            pid,
            exited,
            ended: AtomicBool::new(false),
            started_lines,
            tail,
            spawned_at,
            label: label.to_string(),
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> i32 {
        self.pid.as_raw_nonzero().get()
    }

    /// Its last lines of output, for error messages.
    pub(crate) fn tail(&self) -> String {
        let tail = self.tail.lock().expect("the tail's lock");
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// An error if it has exited.
    pub(crate) fn check_running(&self) -> Result<(), String> {
        match self.exited.try_recv() {
            Ok((_, status)) => {
                self.ended.store(true, Ordering::SeqCst);
                Err(format!(
                    "{} exited early ({status}); its last output:\n{}",
                    self.label,
                    self.tail()
                ))
            }
            Err(_) if self.ended.load(Ordering::SeqCst) => {
                Err(format!("{} has exited", self.label))
            }
            Err(_) => Ok(()),
        }
    }

    /// How many busy handlers have said they started.
    pub(crate) fn started(&self) -> usize {
        self.started_lines.load(Ordering::SeqCst)
    }

    /// CPU seconds so far; see [`cpu_seconds`].
    pub(crate) fn cpu(&self) -> f64 {
        cpu_seconds(self.pid())
    }

    /// Resident memory now, and its peak, in KiB.
    pub(crate) fn memory(&self) -> (u64, u64) {
        memory_kib(self.pid())
    }

    /// Sends SIGTERM and waits for the exit: the time it took, or `None` if it had to be killed
    /// after `deadline`.
    pub(crate) fn terminate(self, deadline: Duration) -> Option<Duration> {
        if self.ended.swap(true, Ordering::SeqCst) {
            return Some(Duration::ZERO);
        }
        let sent = Instant::now();
        if rustix::process::kill_process(self.pid, rustix::process::Signal::TERM).is_err() {
            return self.exited.recv().ok().map(|_| Duration::ZERO);
        }
        match self.exited.recv_timeout(deadline) {
            Ok((at, _)) => Some(at.saturating_duration_since(sent)),
            Err(_) => {
                self.kill();
                None
            }
        }
    }

    /// Sends SIGKILL and waits a while for the exit.
    fn kill(&self) {
        let _ = rustix::process::kill_process(self.pid, rustix::process::Signal::KILL);
        let _ = self.exited.recv_timeout(Duration::from_secs(10));
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.ended.swap(true, Ordering::SeqCst) && self.exited.try_recv().is_err() {
            self.kill();
        }
    }
}

/// CPU seconds of a process so far, to the nanosecond: the sum of its live threads' time on
/// a CPU (`/proc/<pid>/task/*/schedstat`; a thread that has ended no longer counts), or, where
/// the kernel keeps no schedstat, `/proc/<pid>/stat`'s user + system time (10 ms steps).
/// 0 if it is gone.
pub(crate) fn cpu_seconds(pid: i32) -> f64 {
    let threads: f64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        .sum();
    if threads > 0.0 {
        return threads / 1e9;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command name (which may hold spaces), from field 3 on.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15: indexes 11 and 12 after the name.
    (ticks(11) + ticks(12)) / rustix::param::clock_ticks_per_second() as f64
}

/// VmRSS and VmHWM of a process in KiB (`/proc/<pid>/status`), zeros if it is gone.
pub(crate) fn memory_kib(pid: i32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The machine, for the report: CPU model and count, memory, kernel.
pub(crate) fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or("?".into(), |kib| {
            format!("{:.1} GiB", kib / 1024.0 / 1024.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpus} CPUs ({model}), {memory} memory, Linux {}",
        kernel.trim()
    )
}
