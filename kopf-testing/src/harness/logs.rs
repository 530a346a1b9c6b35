//! Capturing what an operator logs in a test: a subscriber made the default on every thread
//! of the test's runtime (so tests running side by side keep their lines apart), writing each
//! line both to the capture and to the test's output.

use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

use super::locks::lock;

/// The lines logged on the threads of one test's runtime.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// A dispatcher writing here and to the test's output, filtered by `RUST_LOG` (default:
    /// `info`).
    pub(crate) fn dispatch(&self) -> tracing::Dispatch {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(self.clone())
            .finish();
        tracing::Dispatch::new(subscriber)
    }

    /// Every complete line so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&lock(&self.0))
            .lines()
            .map(String::from)
            .collect()
    }
}

impl<'a> MakeWriter<'a> for LogCapture {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter(self)
    }
}

/// Writes one formatted event to the capture and to the test's output.
#[derive(Debug)]
pub(crate) struct LineWriter<'a>(&'a LogCapture);

impl std::io::Write for LineWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        lock(&self.0.0).extend_from_slice(data);
        // `print!` (not `std::io::stdout()`) so that libtest captures it with the test's output.
        print!("{}", String::from_utf8_lossy(data));
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
