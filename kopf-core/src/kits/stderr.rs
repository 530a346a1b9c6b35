//! Log lines to stderr from a thread of their own.
//!
//! The runtime's threads only append each formatted line to a shared buffer (a copy, under a
//! lock held for nothing else); one thread writes what has gathered, many lines per `write`.
//! Without it, every line is a `write` call on a runtime thread, under stderr's own lock: a
//! thousand daemons stopping together log a thousand lines, and the runtime's threads take
//! turns at that lock, each waiting for the other's system call.
//!
//! Invariants:
//! 1. Lines reach the sink whole and in the order they were appended.
//! 2. Nothing is dropped: when the sink is slower than the lines come (a reader that does not
//!    keep up), the buffer holds up to its backlog, then appending waits for room, as a direct
//!    write would wait for the pipe.
//! 3. [`LogWriter::written`] resolves once every line appended before it was written (or
//!    failed to be: a closed stderr loses lines, as a direct write would).
//! 4. The thread ends when its [`LogWriter`] is dropped, after writing what is left. The
//!    process's writer ([`stderr`]) starts its thread with the first line: none is started for
//!    a program that never logs through it (one with a `tracing` subscriber of its own).
//! 5. A burst of lines costs one wake of the thread, and one `write` per moment it lasts, not
//!    one per line: the first line wakes it (only the first: the appender that wakes it says
//!    so), and it lingers a moment for the rest of the burst before it writes, and again after
//!    each write (less when asked to flush, closed, or out of room). A thousand daemons
//!    stopping together otherwise woke it a thousand times, each wake a switch of threads on
//!    the runtime's cores.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::helpers::sync::lock;

/// How many bytes of lines may wait for stderr before appending waits for room.
const BACKLOG: usize = 1 << 20;

/// The room made at the start for the lines, so that a burst's first hundred kilobytes do not
/// grow the buffer step by step (a thousand daemons stopping log about as much). Pages not
/// written to take no memory.
const RESERVED: usize = 128 << 10;

/// How long the writer thread, woken by a line or done with a write, waits for more lines
/// before it writes them.
const LINGER: Duration = Duration::from_micros(500);

/// The lines waiting for the writer thread, and who waits for them to be written.
#[derive(Default)]
struct Pending {
    lines: Vec<u8>,
    /// The writer thread holds a batch that it has not written yet.
    writing: bool,
    /// Told when everything appended so far has been written.
    flushes: Vec<oneshot::Sender<()>>,
    /// The owner is gone: the thread writes what is left and ends.
    closed: bool,
    /// The writer thread waits for lines: the next append wakes it, and clears this. Tracked
    /// so that the condvar is notified (a system call) once per wait, not once per line.
    sleeping: bool,
    /// The writer thread, woken or done with a write, waits for the rest of a burst: a flush
    /// or room needed ends that wait early.
    lingering: bool,
    /// How many appenders wait for room.
    full: usize,
}

struct Shared {
    pending: Mutex<Pending>,
    /// Lines were appended (for the writer thread), or room was made (for those appending).
    changed: Condvar,
    backlog: usize,
    linger: Duration,
}

/// A sink written by a thread of its own; dropping it ends the thread once all is written.
pub(crate) struct LogWriter {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the fmt layer writes to (`with_writer`): each `write` appends to a writer thread's
/// buffer (or, where no writer thread could be started, writes to stderr at once).
#[derive(Clone)]
pub(crate) struct Lines(Target);

#[derive(Clone)]
enum Target {
    /// The buffer of a writer of the tests' own.
    #[cfg(test)]
    Buffer(Arc<Shared>),
    /// The process's writer, whose thread starts with the first line: a layer made and then
    /// not installed (the program has a subscriber of its own) starts no thread.
    Process(&'static ProcessWriter),
}

/// A writer that one process keeps for its whole life, started on first use.
struct ProcessWriter {
    writer: OnceLock<Option<LogWriter>>,
    start: fn() -> std::io::Result<LogWriter>,
}

impl ProcessWriter {
    /// Its writer: started now if this is the first use, `None` if no thread could start.
    fn get(&self) -> Option<&LogWriter> {
        self.writer.get_or_init(|| (self.start)().ok()).as_ref()
    }

    /// Whether its thread was started.
    #[cfg(test)]
    fn started(&self) -> bool {
        self.writer.get().is_some_and(Option::is_some)
    }
}

impl LogWriter {
    /// Starts the thread that writes to `sink`; lines may wait for it up to `backlog` bytes,
    /// and, once it is woken or done with a write, up to `linger` for the rest of a burst.
    pub(crate) fn start(
        sink: impl Write + Send + 'static,
        backlog: usize,
        linger: Duration,
    ) -> std::io::Result<LogWriter> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                lines: Vec::with_capacity(backlog.min(RESERVED)),
                ..Pending::default()
            }),
            changed: Condvar::new(),
            backlog,
            linger,
        });
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kopf-log".into())
            .spawn(move || serve(&serving, sink))?;
        Ok(LogWriter {
            shared,
            thread: Some(thread),
        })
    }

    /// Lines for this writer's thread (the process's writer gives its own with [`stderr`]).
    #[cfg(test)]
    fn lines(&self) -> Lines {
        Lines(Target::Buffer(self.shared.clone()))
    }

    /// Resolves once every line appended so far has been written.
    pub(crate) async fn written(&self) {
        let shared = &self.shared;
        let (done, written) = oneshot::channel();
        {
            let mut pending = lock(&shared.pending);
            if pending.lines.is_empty() && !pending.writing {
                return;
            }
            pending.flushes.push(done);
            if pending.lingering {
                shared.changed.notify_all();
            }
        }
        let _ = written.await;
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        let shared = &self.shared;
        lock(&shared.pending).closed = true;
        shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            // What is left is written before the writer is gone (invariant 4).
            let _ = thread.join();
        }
    }
}

/// The writer thread: writes whatever has gathered, until its owner is dropped.
fn serve(shared: &Shared, mut sink: impl Write) {
    let mut batch = Vec::with_capacity(shared.backlog.min(RESERVED));
    loop {
        let mut pending = lock(&shared.pending);
        if pending.lines.is_empty() {
            if !pending.flushes.is_empty() {
                let flushes = std::mem::take(&mut pending.flushes);
                drop(pending);
                for flush in flushes {
                    let _ = flush.send(());
                }
                continue;
            }
            if pending.closed {
                return;
            }
            pending.sleeping = true;
            pending = shared
                .changed
                .wait_while(pending, |pending| {
                    pending.lines.is_empty() && !pending.closed
                })
                .unwrap_or_else(PoisonError::into_inner);
            pending.sleeping = false;
            if pending.lines.is_empty() {
                continue;
            }
            // The first lines of a burst: the rest of it goes in the same write.
            pending = linger(shared, pending);
        }
        std::mem::swap(&mut pending.lines, &mut batch);
        pending.writing = true;
        let full = pending.full > 0;
        drop(pending);
        if full {
            // Room for those waiting to append.
            shared.changed.notify_all();
        }
        // A failing sink (a closed stderr) loses the lines, as a direct write would.
        let _ = sink.write_all(&batch).and_then(|()| sink.flush());
        batch.clear();
        batch.shrink_to(shared.backlog);
        // The lines that come meanwhile wait for the next write, without waking the thread:
        // written at once, a long burst went out a few lines per write, and the buffer, found
        // empty as often as not, let the thread sleep and the next line wake it again. A lone
        // line costs the thread one more timed wake for that, before it sleeps.
        let mut pending = lock(&shared.pending);
        pending.writing = false;
        drop(linger(shared, pending));
    }
}

/// Waits a moment for more lines, unless a flush is asked for, the owner is gone, or
/// appenders wait for room.
fn linger<'a>(shared: &'a Shared, mut pending: MutexGuard<'a, Pending>) -> MutexGuard<'a, Pending> {
    pending.lingering = true;
    let mut pending = shared
        .changed
        .wait_timeout_while(pending, shared.linger, |pending| {
            pending.flushes.is_empty() && !pending.closed && pending.full == 0
        })
        .unwrap_or_else(PoisonError::into_inner)
        .0;
    pending.lingering = false;
    pending
}

impl Lines {
    /// Appends `data` (whole lines) for the writer thread; written at once without one.
    pub(crate) fn append(&self, data: &[u8]) -> std::io::Result<()> {
        let shared = match &self.0 {
            #[cfg(test)]
            Target::Buffer(shared) => shared,
            Target::Process(process) => match process.get() {
                Some(writer) => &writer.shared,
                None => return std::io::stderr().write_all(data),
            },
        };
        let mut pending = lock(&shared.pending);
        if pending.lines.len() >= shared.backlog {
            pending.full += 1;
            if pending.lingering {
                shared.changed.notify_all();
            }
            pending = shared
                .changed
                .wait_while(pending, |pending| pending.lines.len() >= shared.backlog)
                .unwrap_or_else(PoisonError::into_inner);
            pending.full -= 1;
        }
        pending.lines.extend_from_slice(data);
        // The first line since the writer thread began to wait wakes it; the next ones find
        // it woken (invariant 5).
        let sleeping = std::mem::take(&mut pending.sleeping);
        drop(pending);
        if sleeping {
            shared.changed.notify_all();
        }
        Ok(())
    }
}

impl Write for Lines {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.append(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The process's writer to stderr, started by the first line given to [`stderr`].
static STDERR: ProcessWriter = ProcessWriter {
    writer: OnceLock::new(),
    start: || LogWriter::start(std::io::stderr(), BACKLOG, LINGER),
};

/// Lines for stderr, written by the process's log thread (started with the first line);
/// written at once if no thread could be started.
pub(crate) fn stderr() -> Lines {
    Lines(Target::Process(&STDERR))
}

/// Resolves once every line given to [`stderr`] so far has been written: called before the
/// process exits, so that no line is left behind.
pub(crate) async fn flush() {
    if let Some(Some(writer)) = STDERR.writer.get() {
        writer.written().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A sink that keeps what it is given, and can be held shut.
    #[derive(Clone, Default)]
    struct Kept {
        written: Arc<Mutex<Vec<u8>>>,
        shut: Arc<Mutex<()>>,
    }

    impl Write for Kept {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            let _open = lock(&self.shut);
            lock(&self.written).extend_from_slice(data);
            Ok(data.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Kept {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.written).clone()).expect("UTF-8")
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_from_several_threads_arrive_whole_in_order_and_all_before_written_resolves() {
        let sink = Kept::default();
        let writer = LogWriter::start(sink.clone(), 64, LINGER).expect("a thread");
        // Held shut: the 64-byte backlog fills, and appending waits instead of dropping.
        let shut = lock(&sink.shut);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let mut lines = writer.lines();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        lines
                            .write_all(format!("thread {t} line {i}\n").as_bytes())
                            .expect("appended");
                    }
                })
            })
            .collect();
        drop(shut);
        for thread in threads {
            thread.join().expect("appended all");
        }
        tokio::time::timeout(Duration::from_secs(30), writer.written())
            .await
            .expect("written");
        let text = sink.text();
        assert_eq!(text.lines().count(), 2000, "every line, none lost");
        for t in 0..4 {
            let prefix = format!("thread {t} line ");
            let seen: Vec<usize> = text
                .lines()
                .filter_map(|line| line.strip_prefix(&prefix))
                .map(|i| i.parse().expect("a whole line"))
                .collect();
            assert_eq!(seen, (0..500).collect::<Vec<_>>(), "thread {t} in order");
        }
    }

    /// A sink that counts its `write` calls.
    #[derive(Clone, Default)]
    struct Counted(Arc<Mutex<Vec<usize>>>);

    impl Write for Counted {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).push(data.len());
            Ok(data.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A burst costs the writer thread one wake and one write (invariant 5): woken by the
    /// first line, it waits for the rest (here as long as it may: until the flush asks).
    #[tokio::test]
    async fn a_burst_of_lines_is_written_at_once_and_a_flush_does_not_wait_for_the_linger() {
        let sink = Counted::default();
        let writer =
            LogWriter::start(sink.clone(), BACKLOG, Duration::from_secs(3600)).expect("a thread");
        let mut lines = writer.lines();
        for i in 0..1000 {
            lines
                .write_all(format!("line {i:03}\n").as_bytes())
                .expect("appended");
        }
        tokio::time::timeout(Duration::from_secs(30), writer.written())
            .await
            .expect("written without waiting for the linger");
        assert_eq!(*lock(&sink.0), vec![9000], "one write of every line");
    }

    /// A sink that takes a while per `write`, as a pipe to a slow reader does, and counts the
    /// writes and the bytes.
    #[derive(Clone, Default)]
    struct Slow(Arc<Mutex<(usize, usize)>>);

    impl Write for Slow {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(2));
            let mut counts = lock(&self.0);
            counts.0 += 1;
            counts.1 += data.len();
            Ok(data.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Lines that keep coming while the thread writes wait a moment for more, as the first
    /// lines of a burst do (invariant 5): at most one write per linger, however slow the sink.
    /// Written at once, they went out a few per write, one write after the other.
    #[tokio::test]
    async fn a_long_burst_is_written_once_per_linger_while_the_sink_is_slow() {
        let linger = Duration::from_millis(20);
        let sink = Slow::default();
        let writer = LogWriter::start(sink.clone(), BACKLOG, linger).expect("a thread");
        let started = std::time::Instant::now();
        let mut lines = writer.lines();
        let appending = std::thread::spawn(move || {
            for i in 0..200 {
                lines
                    .write_all(format!("line {i:03}\n").as_bytes())
                    .expect("appended");
                std::thread::sleep(Duration::from_micros(500));
            }
        });
        tokio::task::spawn_blocking(move || appending.join().expect("appended all"))
            .await
            .expect("joined");
        tokio::time::timeout(Duration::from_secs(30), writer.written())
            .await
            .expect("written");
        let elapsed = started.elapsed();
        let (writes, bytes) = *lock(&sink.0);
        assert_eq!(bytes, 200 * "line 000\n".len(), "every line written");
        // Every write but the flushed last one follows a whole linger.
        let most = (elapsed.as_millis() / linger.as_millis()) as usize + 2;
        assert!(
            writes <= most,
            "{writes} writes in {elapsed:?}: more than one per linger ({most})"
        );
    }

    #[test]
    fn dropping_the_writer_writes_what_is_left_and_ends_its_thread() {
        let sink = Kept::default();
        let writer = LogWriter::start(sink.clone(), BACKLOG, LINGER).expect("a thread");
        let shut = lock(&sink.shut);
        writer.lines().write_all(b"last words\n").expect("appended");
        let dropping = std::thread::spawn(move || drop(writer));
        drop(shut);
        dropping.join().expect("dropped");
        assert_eq!(sink.text(), "last words\n");
    }

    /// Where the process writer of the test below writes.
    static FIRST_LINES: OnceLock<Kept> = OnceLock::new();

    /// A process writer of the test's own (the real one writes to the test binary's stderr).
    static PROCESS: ProcessWriter = ProcessWriter {
        writer: OnceLock::new(),
        start: || {
            let sink = FIRST_LINES.get_or_init(Kept::default).clone();
            LogWriter::start(sink, BACKLOG, LINGER)
        },
    };

    #[tokio::test]
    async fn the_process_writer_starts_its_thread_with_the_first_line_only() {
        let mut lines = Lines(Target::Process(&PROCESS));
        // As a layer made for a subscriber that is then not installed.
        let unused = lines.clone();
        drop(unused);
        assert!(!PROCESS.started(), "a thread with no line to write");
        lines.write_all(b"first\n").expect("appended");
        assert!(PROCESS.started());
        let writer = PROCESS.get().expect("started");
        tokio::time::timeout(Duration::from_secs(30), writer.written())
            .await
            .expect("written");
        assert_eq!(FIRST_LINES.get().expect("a sink").text(), "first\n");
    }
}
