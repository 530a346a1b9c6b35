//! Errors that handlers return, and the two kinds that change what the framework does next.
//!
//! A handler returns [`kopf::Result`](crate::Result). Any error converts into [`Error`] with
//! `?`; the framework retries it after the handler's `backoff` (Kopf's default `errors` mode).
//! Two kinds change that:
//!
//! ```
//! # fn example(ready: bool, config_ok: bool) -> kopf::Result<()> {
//! use std::time::Duration;
//! if !ready {
//!     // Not an error yet: try again in 10 seconds.
//!     return Err(kopf::TemporaryError::new("the database is not ready").delay(Duration::from_secs(10)).into());
//! }
//! if !config_ok {
//!     // Retrying will not help: give up on this handler for this object.
//!     return Err(kopf::PermanentError::new("spec.size must be positive").into());
//! }
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::time::Duration;

/// The result type of handlers.
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

/// An error from a handler: any `std::error::Error`, or a [`TemporaryError`] or
/// [`PermanentError`] that tells the framework how to go on.
pub struct Error {
    kind: ErrorKind,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

/// How the framework treats an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Any error: handled per the handler's `errors` mode.
    Arbitrary,
    /// Retry after the delay (immediately when `None`).
    Temporary(Option<Duration>),
    /// Do not retry.
    Permanent,
    /// The framework's own: the handler was stopped before it started (a sync handler still
    /// waiting for a thread), or the sub-handlers it ran in place were aborted; nothing is
    /// recorded, as after an abort.
    NotStarted,
    /// The framework's own (Kopf's `HandlerChildrenRetry`): sub-handlers that the handler ran
    /// in place ([`execute`](crate::execute)) are unfinished; the handler is retried after the
    /// delay, without the log and Event of a failure.
    ChildrenRetry(Duration),
}

impl Error {
    /// An error with this message (handled per the handler's `errors` mode).
    pub fn msg(message: impl fmt::Display) -> Self {
        Error {
            kind: ErrorKind::Arbitrary,
            source: message.to_string().into(),
        }
    }

    /// The handler was stopped before it started: it did not run, and nothing is recorded.
    pub(crate) fn not_started(message: impl fmt::Display) -> Self {
        Error {
            kind: ErrorKind::NotStarted,
            source: message.to_string().into(),
        }
    }

    /// Sub-handlers run in place are unfinished: the handler is retried after `delay`.
    pub(crate) fn children_retry(delay: Duration) -> Self {
        Error {
            kind: ErrorKind::ChildrenRetry(delay),
            source: "unfinished sub-handlers".into(),
        }
    }

    /// Whether this error asks to retry ([`TemporaryError`], or the unfinished sub-handlers of
    /// [`execute`](crate::execute)).
    pub fn is_temporary(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Temporary(_) | ErrorKind::ChildrenRetry(_)
        )
    }

    /// Whether this error asks never to retry ([`PermanentError`], or the framework's own
    /// [`HandlerRetriesError`] and [`HandlerTimeoutError`], which are permanent as in Kopf).
    pub fn is_permanent(&self) -> bool {
        self.kind() == ErrorKind::Permanent
    }

    pub(crate) fn kind(&self) -> ErrorKind {
        // Kopf's `HandlerRetriesError` and `HandlerTimeoutError` are `PermanentError`s: here
        // they convert as any error does, and are permanent all the same.
        if self.kind == ErrorKind::Arbitrary
            && (self.source.is::<HandlerRetriesError>() || self.source.is::<HandlerTimeoutError>())
        {
            return ErrorKind::Permanent;
        }
        self.kind
    }

    /// The HTTP code of an [`AdmissionError`]; `None` for other errors.
    pub(crate) fn admission_code(&self) -> Option<u16> {
        self.source
            .downcast_ref::<Denial>()
            .map(|denial| denial.code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source.downcast_ref::<kube::Error>() {
            Some(error) => f.write_str(&describe(error)),
            None => fmt::Display::fmt(&self.source, f),
        }
    }
}

/// A Kubernetes client's error in a line: for an API error, the server's message with its
/// code and reason (kube's own text repeats the whole status in its `Debug` form).
pub(crate) fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", status.reason)
            };
            format!("{} ({}{reason})", status.message, status.code)
        }
        other => other.to_string(),
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("source", &self.source)
            .finish()
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(error: E) -> Self {
        Error {
            kind: ErrorKind::Arbitrary,
            source: Box::new(error),
        }
    }
}

/// An error after which the handler is retried, after `delay` (default 60 s, as Kopf).
#[derive(Debug, Clone, PartialEq)]
pub struct TemporaryError {
    message: String,
    delay: Option<Duration>,
}

impl TemporaryError {
    /// Retry after the default delay of 60 seconds.
    pub fn new(message: impl Into<String>) -> Self {
        TemporaryError {
            message: message.into(),
            delay: Some(Duration::from_secs(60)),
        }
    }

    /// Retry after this delay instead.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Retry as soon as possible.
    pub fn immediately(mut self) -> Self {
        self.delay = None;
        self
    }
}

impl fmt::Display for TemporaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<TemporaryError> for Error {
    fn from(error: TemporaryError) -> Self {
        Error {
            kind: ErrorKind::Temporary(error.delay),
            source: error.message.into(),
        }
    }
}

/// An error after which the handler is not retried for this object.
#[derive(Debug, Clone, PartialEq)]
pub struct PermanentError {
    message: String,
}

impl PermanentError {
    /// A permanent failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        PermanentError {
            message: message.into(),
        }
    }
}

impl fmt::Display for PermanentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<PermanentError> for Error {
    fn from(error: PermanentError) -> Self {
        Error {
            kind: ErrorKind::Permanent,
            source: error.message.into(),
        }
    }
}

/// A handler is out of retries: the framework gives up on it for this object (Kopf's
/// `kopf.HandlerRetriesError`, a `PermanentError`). The operator makes it when an attempt is
/// refused because the handler's `retries` are used up, or when an attempt fails and the next
/// one would exceed them; it is the `error` of the handler's
/// [`HandlerOutcome::Failed`](crate::outcomes::HandlerOutcome::Failed), and its message is the
/// line logged. A handler may return one too: it is permanent, as a [`PermanentError`].
///
/// ```
/// use kopf::outcomes::{Failure, HandlerOutcome};
///
/// fn gave_up(outcome: &HandlerOutcome) -> Option<u32> {
///     match outcome {
///         HandlerOutcome::Failed { error: Failure::Retries(error), .. } => Some(error.retries()),
///         _ => None,
///     }
/// }
///
/// let error = kopf::HandlerRetriesError::new("Handler 'create_fn' has exceeded 3 retries.", 3);
/// let outcome = HandlerOutcome::Failed {
///     message: error.to_string(),
///     retries: 3,
///     error: Failure::Retries(error),
/// };
/// assert_eq!(gave_up(&outcome), Some(3));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerRetriesError {
    message: String,
    retries: u32,
}

impl HandlerRetriesError {
    /// The handler `retries` option was used up; `message` says so.
    pub fn new(message: impl Into<String>, retries: u32) -> Self {
        HandlerRetriesError {
            message: message.into(),
            retries,
        }
    }

    /// The handler's `retries` option: how many attempts it had.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

impl fmt::Display for HandlerRetriesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HandlerRetriesError {}

/// A handler is out of time: the framework gives up on it for this object (Kopf's
/// `kopf.HandlerTimeoutError`, a `PermanentError`). The operator makes it when the handler's
/// `timeout` passed since its first attempt (an attempt still running is stopped with
/// [`StopReason::Timeout`](crate::StopReason::Timeout)), or when an attempt fails and the next
/// one would come too late; it is the `error` of the handler's
/// [`HandlerOutcome::Failed`](crate::outcomes::HandlerOutcome::Failed), and its message is the
/// line logged. A handler may return one too: it is permanent, as a [`PermanentError`].
///
/// ```
/// use std::time::Duration;
///
/// #[kopf::on_create("kopfexamples", timeout = 600)]
/// async fn create_fn(runtime: Duration) -> kopf::Result<()> {
///     // Give up early, as the framework would at 600 seconds.
///     if runtime > Duration::from_secs(300) {
///         let line = format!("gave up after {runtime:?}");
///         return Err(kopf::HandlerTimeoutError::new(line, Duration::from_secs(300)).into());
///     }
///     Err(kopf::TemporaryError::new("not yet").into())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerTimeoutError {
    message: String,
    timeout: Duration,
}

impl HandlerTimeoutError {
    /// The handler's `timeout` passed; `message` says so.
    pub fn new(message: impl Into<String>, timeout: Duration) -> Self {
        HandlerTimeoutError {
            message: message.into(),
            timeout,
        }
    }

    /// The handler's `timeout` option: how long it had since its first attempt.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl fmt::Display for HandlerTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HandlerTimeoutError {}

/// An error of an admission handler (`on_validate`, `on_mutate`) that denies the request with
/// this message and HTTP code (500 unless given), as the API client sees them:
/// `admission webhook "..." denied the request: <message>`.
///
/// Any error of an admission handler denies the request; this one says how. When several
/// handlers fail in one review, the response names one error, preferring an `AdmissionError`
/// to a [`PermanentError`], that to a [`TemporaryError`], and that to any other error (the
/// first of its rank, in the order the handlers were registered). Admission handlers are
/// never retried; for other handlers, this error is a [`PermanentError`].
///
/// ```
/// fn check_size(spec: &serde_json::Value) -> kopf::Result<()> {
///     if spec["size"].as_i64().unwrap_or(0) > 10 {
///         return Err(kopf::AdmissionError::new("spec.size is at most 10").code(422).into());
///     }
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an admission error denies a request only when returned"]
pub struct AdmissionError {
    message: String,
    code: u16,
}

impl AdmissionError {
    /// A denial with this message and the code 500.
    pub fn new(message: impl Into<String>) -> Self {
        AdmissionError {
            message: message.into(),
            code: 500,
        }
    }

    /// The HTTP code of the denial instead of 500; kube-apiserver answers the API client with
    /// it when it is 400 or more, else with 400.
    pub fn code(mut self, code: u16) -> Self {
        self.code = code;
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The HTTP code.
    pub fn status_code(&self) -> u16 {
        self.code
    }
}

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<AdmissionError> for Error {
    fn from(error: AdmissionError) -> Self {
        Error {
            kind: ErrorKind::Permanent,
            source: Box::new(Denial {
                message: error.message,
                code: error.code,
            }),
        }
    }
}

/// An [`AdmissionError`] inside an [`Error`]. `AdmissionError` itself is no
/// `std::error::Error`: it would then convert into `Error` twice (as any error, and as itself).
#[derive(Debug)]
struct Denial {
    message: String,
    code: u16,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Denial {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_retries_or_time_is_permanent() {
        let retries: Error = HandlerRetriesError::new("out of retries", 3).into();
        assert!(retries.is_permanent());
        assert_eq!(retries.kind(), ErrorKind::Permanent);
        assert_eq!(retries.to_string(), "out of retries");
        let timeout: Error = HandlerTimeoutError::new("out of time", Duration::from_secs(9)).into();
        assert!(timeout.is_permanent());
        assert_eq!(timeout.kind(), ErrorKind::Permanent);
        let other: Error = std::io::Error::other("disk").into();
        assert_eq!(other.kind(), ErrorKind::Arbitrary);
    }

    #[test]
    fn kinds_survive_conversion() {
        let error: Error = TemporaryError::new("later")
            .delay(Duration::from_secs(5))
            .into();
        assert_eq!(
            error.kind(),
            ErrorKind::Temporary(Some(Duration::from_secs(5)))
        );
        assert_eq!(error.to_string(), "later");
        let error: Error = PermanentError::new("never").into();
        assert!(error.is_permanent());
        let error: Error = std::io::Error::other("disk").into();
        assert_eq!(error.kind(), ErrorKind::Arbitrary);
        assert_eq!(error.to_string(), "disk");
        fn question_mark() -> Result<()> {
            let _: u32 = "x".parse()?;
            Ok(())
        }
        assert!(!question_mark().unwrap_err().is_temporary());
    }

    #[test]
    fn an_api_error_reads_as_the_servers_message_with_its_code_and_reason() {
        let mut status = kube::core::Status::failure(
            "kopfexamples.kopf.dev \"one\" is forbidden: cannot patch",
            "Forbidden",
        );
        status.code = 403;
        let error = Error::from(kube::Error::Api(status.boxed()));
        assert_eq!(
            error.to_string(),
            "kopfexamples.kopf.dev \"one\" is forbidden: cannot patch (403 Forbidden)"
        );
        assert_eq!(Error::msg("plain").to_string(), "plain");
    }
}
