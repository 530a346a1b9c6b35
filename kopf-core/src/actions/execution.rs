//! Running one handler once: limits checked first, the attempt raced against its timeout and
//! the operator's abort, panics caught, and the result turned into an [`Outcome`]. A timeout
//! cancels the handler's `stopped` token with [`StopReason::Timeout`]; a handler that returns
//! after being asked to stop is logged with the reason.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::Value;

use crate::actions::invocation::SubHandlers;
use crate::actions::invocation::{ErrorsMode, HandlerFn, HandlerResult, Invocation, Options};
use crate::aiokits::metrics::Ended;
use crate::aiokits::tasks::{StopReason, Tasks};
use crate::aiokits::work::Work;
use crate::clients::posting::Logger;
use crate::helpers::joined::Joined;
use crate::structs::errors::ErrorKind;
use crate::structs::errors::{HandlerRetriesError, HandlerTimeoutError};
use crate::structs::outcomes::{Failure, HandlerOutcome};

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Done; the value (if any) goes to `status.<handler-id>`.
    Success(Option<Value>),
    /// Try again after the delay.
    Retry { delay: Duration, message: String },
    /// Done, failed: the message stored, and why.
    Failure(String, Failure),
    /// The operator aborted the attempt, or stopped it before it started; nothing is
    /// recorded.
    Aborted,
}

impl Outcome {
    /// How the attempt ended after `retries` attempts, as tests read it
    /// ([`Operator::outcomes`](crate::operator::Operator::outcomes)); `None` when it was aborted.
    pub(crate) fn as_handler_outcome(&self, retries: u32) -> Option<HandlerOutcome> {
        match self {
            Outcome::Success(_) => Some(HandlerOutcome::Succeeded { retries }),
            Outcome::Retry { message, .. } => Some(HandlerOutcome::Retrying {
                message: message.clone(),
                retries,
            }),
            Outcome::Failure(message, error) => Some(HandlerOutcome::Failed {
                message: message.clone(),
                retries,
                error: error.clone(),
            }),
            Outcome::Aborted => None,
        }
    }

    /// How the attempt ended, for the metrics; `None` when it was aborted (not counted).
    fn ended(&self) -> Option<Ended> {
        match self {
            Outcome::Success(_) => Some(Ended::Success),
            Outcome::Retry { .. } => Some(Ended::Retry),
            Outcome::Failure(..) => Some(Ended::Failure),
            Outcome::Aborted => None,
        }
    }
}

/// What kind of resource handler an attempt is of: how Kopf's log lines name it, and whether
/// its success is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A change, event or login handler: `Handler 'id' succeeded.`
    Handler,
    /// `Daemon 'id' succeeded.` (when it exits).
    Daemon,
    /// `Timer 'id' succeeded.`
    Timer,
    /// An index function: its successes, one per object and event, are not logged (as Kopf).
    Index,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Handler | Kind::Index => "Handler",
            Kind::Daemon => "Daemon",
            Kind::Timer => "Timer",
        }
    }
}

/// Runs one attempt of the resource handler `id` whose earlier attempts failed `retry` times
/// since `started`. The attempt is registered as in flight while it runs, and its invocation's
/// node is named after it, so that a stop can say what it waits for and what it aborts.
///
/// The limits are checked and the handler is called as the future is made (it runs when
/// polled): see [`Attempt::run`].
pub(crate) fn execute<'a>(
    id: &'a str,
    function: &'a HandlerFn,
    options: impl Into<Retrying>,
    default_backoff: Duration,
    invocation: Invocation,
) -> impl Future<Output = Outcome> + 'a {
    execute_as(
        Kind::Handler,
        id,
        function,
        options,
        default_backoff,
        invocation,
    )
}

/// As [`execute`], for a handler of this kind.
pub(crate) fn execute_as<'a>(
    kind: Kind,
    id: &'a str,
    function: &'a HandlerFn,
    options: impl Into<Retrying>,
    default_backoff: Duration,
    mut invocation: Invocation,
) -> impl Future<Output = Outcome> + 'a {
    let (namespace, name) = (invocation.namespace(), invocation.name());
    // A daemon's attempts run in a node named after the daemon already: no copy of its names.
    if !invocation
        .node
        .work()
        .is_some_and(|work| work.is(id, namespace, name))
    {
        let work = Work::new(id, namespace, name);
        invocation.node = invocation.node.doing(work);
    }
    let counted_as = invocation.counted_as.take();
    let attempt = Attempt {
        label: kind.label(),
        report_success: kind != Kind::Index,
        id,
        options: options.into(),
        default_backoff,
        retry: invocation.retry,
        runtime: invocation.runtime(),
        node: invocation.node.clone(),
        logger: invocation.logger.clone(),
        // A parent with sub-handlers is reported by the caller, once they have finished.
        subhandlers: Some(invocation.gathered.clone()),
        counted_as,
    };
    // The toolkits' free functions (`kopf::info`, `kopf::hierarchies::adopt_to_current`) act for
    // it.
    let current = crate::actions::current::Current::of(&invocation);
    attempt.run(move || current.enter(|| function(invocation)))
}

pin_project_lite::pin_project! {
    /// An attempt's future, counted in the metrics and recorded among the outcomes as it ends.
    ///
    /// A struct rather than an `async` block: such a block kept the attempt's future twice, as
    /// its captured variable and as what it awaited (800 bytes more for every handler and
    /// daemon running).
    struct Recorded<'a, F> {
        #[pin]
        attempt: F,
        counted: Option<Counted<'a>>,
    }
}

impl<F: Future<Output = Outcome>> Future for Recorded<'_, F> {
    type Output = Outcome;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Outcome> {
        let this = self.project();
        let outcome = std::task::ready!(this.attempt.poll(cx));
        if let Some(counted) = this.counted.take() {
            counted.count(&outcome);
        }
        std::task::Poll::Ready(outcome)
    }
}

/// What an attempt's end is counted and recorded under.
struct Counted<'a> {
    metrics: Option<crate::aiokits::metrics::Metrics>,
    began: std::time::Instant,
    /// The handler id to count it under, if not its own.
    counted_as: Option<String>,
    id: &'a str,
    retry: u32,
    /// Where outcomes are kept, and the work to keep this one under.
    recorded: Option<(crate::structs::outcomes::Outcomes, Work)>,
}

impl Counted<'_> {
    fn count(self, outcome: &Outcome) {
        if let (Some(metrics), Some(ended)) = (self.metrics, outcome.ended()) {
            let counted_as = self.counted_as.as_deref().unwrap_or(self.id);
            metrics.handled(counted_as, self.retry, ended, self.began.elapsed());
        }
        if let Some((outcomes, work)) = self.recorded
            && let Some(ended) = outcome.as_handler_outcome(self.retry.saturating_add(1))
        {
            outcomes.record(work.object(), work.handler(), ended);
        }
    }
}

/// The options of a handler that limit and pace its attempts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retrying {
    pub(crate) errors: ErrorsMode,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: Option<u32>,
    pub(crate) backoff: Option<Duration>,
}

impl From<&Options> for Retrying {
    fn from(options: &Options) -> Retrying {
        Retrying {
            errors: options.errors,
            timeout: options.timeout,
            retries: options.retries,
            backoff: options.backoff,
        }
    }
}

/// One attempt of any handler (resource handlers through [`execute`], operator activities
/// directly): what it needs besides the call itself.
pub(crate) struct Attempt<'a> {
    /// `Handler` or `Activity`, as Kopf's log lines start.
    pub(crate) label: &'static str,
    pub(crate) id: &'a str,
    pub(crate) options: Retrying,
    pub(crate) default_backoff: Duration,
    /// Failed attempts before this one.
    pub(crate) retry: u32,
    /// Since the first attempt.
    pub(crate) runtime: Duration,
    /// The invocation's node, named after its work.
    pub(crate) node: Tasks,
    pub(crate) logger: Logger,
    /// The sub-handlers the call may register.
    pub(crate) subhandlers: Option<SubHandlers>,
    /// Whether a success is logged (not an index function's).
    pub(crate) report_success: bool,
    /// The handler id to count the attempt under in the metrics, if not its own (a
    /// sub-handler's parent at the top).
    pub(crate) counted_as: Option<String>,
}

impl<'a> Attempt<'a> {
    /// Checks the limits, makes the call (raced against its timeout and the abort, panics
    /// caught), logs the outcome in Kopf's words, and counts it in the operator's metrics.
    ///
    /// The limits are checked, and the handler is called (its future made, and a sync
    /// handler's thread started), as the future is made; the call runs when it is polled.
    /// Made in an `async fn`, every layer kept its own copy of the attempt and of the call
    /// (with the invocation) for as long as the handler ran: a daemon's future took 8 KiB.
    pub(crate) fn run<Fut>(
        mut self,
        call: impl FnOnce() -> Fut,
    ) -> impl Future<Output = Outcome> + 'a
    where
        Fut: Future<Output = HandlerResult> + 'a,
    {
        let counted = Counted {
            metrics: self.node.metrics().cloned(),
            began: std::time::Instant::now(),
            counted_as: self.counted_as.take(),
            id: self.id,
            retry: self.retry,
            recorded: self.node.outcomes().cloned().zip(self.node.work().cloned()),
        };
        Recorded {
            attempt: self.attempt(call),
            counted: Some(counted),
        }
    }

    /// The limits checked and the call made now; the rest when polled.
    fn attempt<Fut>(self, call: impl FnOnce() -> Fut) -> impl Future<Output = Outcome> + 'a
    where
        Fut: Future<Output = HandlerResult> + 'a,
    {
        let Attempt {
            label,
            id,
            options,
            default_backoff,
            retry,
            runtime,
            node,
            logger,
            subhandlers,
            report_success,
            counted_as: _,
        } = self;
        let refused = {
            let report = Report {
                label,
                id,
                logger: &logger,
                exiting: false,
            };
            match (options.timeout, options.retries) {
                (Some(timeout), _) if runtime >= timeout => {
                    Some(report.timed_out(runtime, timeout))
                }
                (_, Some(limit)) if retry >= limit => {
                    Some(report.gave_up(Limit::Retries(limit), |_| {
                        format!("{label} '{id}' has exceeded {limit} retries.")
                    }))
                }
                _ => None,
            }
        };
        let called = match refused {
            Some(outcome) => Err(outcome),
            None => {
                let in_flight = node.in_flight();
                let began = std::time::Instant::now();
                Ok((AssertUnwindSafe(call()).catch_unwind(), in_flight, began))
            }
        };
        // A block, not an `async fn` of its own: one taking the attempt and the call made
        // kept both twice (a daemon's future grew from 3.6 to 4.4 KiB).
        async move {
            let (attempt, _in_flight, began) = match called {
                Ok(called) => called,
                Err(outcome) => return outcome,
            };
            let mut report = Report {
                label,
                id,
                logger: &logger,
                exiting: false,
            };
            let remaining = options.timeout.map(|t| t.saturating_sub(runtime));
            let timed = async {
                match remaining {
                    Some(remaining) => {
                        tokio::pin!(attempt);
                        tokio::select! {
                            finished = &mut attempt => Some(finished),
                            // The reason is set while the attempt is still alive, so a sync
                            // handler's thread, abandoned when the attempt is dropped, is logged
                            // with it. Boxed: a timer is large, and most attempts have none.
                            _ = Box::pin(tokio::time::sleep(remaining)) => {
                                node.cancel(StopReason::Timeout);
                                None
                            }
                        }
                    }
                    None => Some(attempt.await),
                }
            };
            let finished = tokio::select! {
                biased;
                _ = node.aborted() => return Outcome::Aborted,
                finished = timed => finished,
            };
            // Read once: each read locks the node's token (a thousand daemons end together).
            let stop_reason = node.stop_reason();
            if finished.is_some()
                && let Some(reason) = stop_reason
                && let Some(work) = node.work()
            {
                tracing::debug!(target: "kopf::handler", handler = %work.handler(), object = %work.object(), stop_reason = %reason, "the handler returned after it was asked to stop: {reason}");
            }
            // A retry asked for because the operator is exiting is not a failed attempt.
            report.exiting = stop_reason == Some(StopReason::OperatorExiting);
            let report = report;
            // Kopf's look-ahead: a retry that could not happen is a failure now.
            let limit = |delay: Duration| -> Option<Limit> {
                if let Some(limit) = options.retries
                    && retry.saturating_add(1) >= limit
                {
                    return Some(Limit::Retries(limit));
                }
                match options.timeout {
                    Some(timeout) if runtime + began.elapsed() + delay >= timeout => {
                        Some(Limit::Timeout(timeout))
                    }
                    _ => None,
                }
            };
            let arbitrary = |message: String| -> Outcome {
                match options.errors {
                    ErrorsMode::Temporary => {
                        let delay = options.backoff.unwrap_or(default_backoff);
                        match limit(delay) {
                        Some(limit) => report.gave_up_with(limit, message, |limit, message| {
                            format!(
                                "{label} '{id}' failed with an exception and will stop now ({}): {message}",
                                limit.next_attempt()
                            )
                        }),
                        None => report.retry(delay, message, |message| {
                            format!(
                                "{label} '{id}' failed with an exception and will try again in {} seconds: {message}",
                                seconds(delay)
                            )
                        }),
                    }
                    }
                    ErrorsMode::Permanent => report.failure(
                        format!(
                            "{label} '{id}' failed with an exception and will stop now: {message}"
                        ),
                        Some(message),
                        Failure::Permanent,
                    ),
                    ErrorsMode::Ignored => {
                        logger.error(format_args!(
                            "{label} '{id}' failed with an exception and will ignore it: {message}"
                        ));
                        Outcome::Success(None)
                    }
                }
            };
            match finished {
                // Only a handler with a timeout is raced against one.
                None => report.timed_out(
                    runtime + began.elapsed(),
                    options.timeout.unwrap_or_default(),
                ),
                Some(Err(panic)) => {
                    arbitrary(format!("the handler panicked: {}", panic_message(&panic)))
                }
                Some(Ok(Ok(value))) => {
                    // As Kopf, also when it was asked to stop (every daemon, at the exit).
                    if report_success && subhandlers.is_none_or(|s| s.none_after_the_call()) {
                        report.succeeded();
                    }
                    Outcome::Success(value)
                }
                Some(Ok(Err(error))) => match error.kind() {
                    ErrorKind::Temporary(delay) => {
                        let delay = delay.unwrap_or_default();
                        let message = error.to_string();
                        match limit(delay) {
                        Some(limit) => report.gave_up(limit, |limit| match limit {
                            Limit::Retries(limit) => format!("{label} '{id}' failed temporarily but will exceed {limit} retries: {message}"),
                            Limit::Timeout(timeout) => format!(
                                "{label} '{id}' failed temporarily but will time out after {} seconds: {message}",
                                seconds(*timeout)
                            ),
                        }),
                        None => report.retry(delay, message, |message| {
                            format!("{label} '{id}' failed temporarily: {message}")
                        }),
                    }
                    }
                    ErrorKind::Permanent => {
                        let message = error.to_string();
                        report.failure(
                            format!("{label} '{id}' failed permanently: {message}"),
                            Some(message),
                            Failure::Permanent,
                        )
                    }
                    ErrorKind::Arbitrary => arbitrary(error.to_string()),
                    ErrorKind::NotStarted => Outcome::Aborted,
                    // As Kopf's `HandlerChildrenRetry`: no limits looked ahead, no failure
                    // logged; the sub-handlers keep their own retries.
                    ErrorKind::ChildrenRetry(delay) => report.children_retry(delay),
                },
            }
        }
    }
}

/// A limit that the next attempt would pass.
#[derive(Clone, Copy)]
enum Limit {
    Retries(u32),
    Timeout(Duration),
}

impl Limit {
    /// The framework's error for this limit, with the line logged.
    fn error(self, line: &str) -> Failure {
        match self {
            Limit::Retries(limit) => Failure::Retries(HandlerRetriesError::new(line, limit)),
            Limit::Timeout(timeout) => Failure::Timeout(HandlerTimeoutError::new(line, timeout)),
        }
    }

    fn next_attempt(&self) -> String {
        match self {
            Limit::Retries(limit) => format!("it would exceed {limit} retries on the next attempt"),
            Limit::Timeout(timeout) => format!(
                "it would time out in {} seconds on the next attempt",
                seconds(*timeout)
            ),
        }
    }
}

/// The longest success line joined on the stack (longer ones are formatted).
const SUCCEEDED_ON_STACK: usize = 128;

/// Logs an attempt's outcome with Kopf's wording, and makes the outcome.
struct Report<'a> {
    label: &'static str,
    id: &'a str,
    logger: &'a Logger,
    /// The operator is exiting: a retry is not recorded (as Kopf records nothing of a
    /// cancelled handler), so the next start tries again with the same count.
    exiting: bool,
}

impl Report<'_> {
    /// A success: logged, and posted as the logger posts unless the operator exits (as Kopf,
    /// whose poster stops first: or every restart would post an Event per daemon).
    ///
    /// The line is joined on the stack and logged as text, not formatted: a success is logged
    /// for most handlers' calls (for every daemon at the exit), and its formatting took a
    /// fifth of its line's instructions.
    fn succeeded(&self) {
        let (label, id) = (self.label, self.id);
        match Joined::<SUCCEEDED_ON_STACK>::new(&[label, " '", id, "' succeeded."]) {
            Some(line) => self.log_success(line.as_str()),
            None => self.log_success(&format!("{label} '{id}' succeeded.")),
        }
    }

    fn log_success(&self, line: &str) {
        if self.exiting {
            tracing::info!(target: "kopf::objects", parent: self.logger.span(), message = line);
        } else {
            self.logger.info_text(line);
        }
    }

    /// A failure; the line is logged, and stored unless a shorter `message` is given.
    fn failure(&self, line: String, message: Option<String>, error: Failure) -> Outcome {
        self.logger.error(&line);
        Outcome::Failure(message.unwrap_or(line), error)
    }

    /// The framework gives up on the handler at `limit`: the line is logged and stored, and
    /// is the message of the limit's error (as Kopf's `HandlerRetriesError` and
    /// `HandlerTimeoutError` carry the line they log).
    fn gave_up(&self, limit: Limit, line: impl FnOnce(&Limit) -> String) -> Outcome {
        let line = line(&limit);
        let error = limit.error(&line);
        self.failure(line, None, error)
    }

    /// As [`gave_up`](Self::gave_up), but the shorter `message` is stored.
    fn gave_up_with(
        &self,
        limit: Limit,
        message: String,
        line: impl FnOnce(&Limit, &str) -> String,
    ) -> Outcome {
        let line = line(&limit, &message);
        let error = limit.error(&line);
        self.failure(line, Some(message), error)
    }

    /// A retry, logged with the `line` made of the message (not made when the operator exits).
    fn retry(
        &self,
        delay: Duration,
        message: String,
        line: impl FnOnce(&str) -> String,
    ) -> Outcome {
        if self.exiting {
            let (label, id) = (self.label, self.id);
            tracing::debug!(target: "kopf::handler", parent: self.logger.span(), "{label} '{id}' was interrupted by the operator's exit ({message}); it is not counted as an attempt");
            return Outcome::Aborted;
        }
        self.logger.error(line(&message));
        Outcome::Retry { delay, message }
    }

    /// Sub-handlers run in place ([`execute`](crate::execute)) are unfinished: retried after
    /// the delay, logged at DEBUG as Kopf logs it.
    fn children_retry(&self, delay: Duration) -> Outcome {
        if self.exiting {
            return Outcome::Aborted;
        }
        let (label, id) = (self.label, self.id);
        tracing::debug!(target: "kopf::handler", parent: self.logger.span(), "{label} '{id}' has unfinished sub-handlers. Will retry soon.");
        Outcome::Retry {
            delay,
            message: String::new(),
        }
    }

    fn timed_out(&self, runtime: Duration, timeout: Duration) -> Outcome {
        let (label, id) = (self.label, self.id);
        self.gave_up(Limit::Timeout(timeout), |_| {
            format!("{label} '{id}' has timed out after {}.", timedelta(runtime))
        })
    }
}

/// Seconds as Python prints a float: `60`, `1.5`.
fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs}")
    }
}

/// A duration as Python prints a `timedelta`: `0:01:00`, `0:00:01.500000`, `1 day, 2:00:00`.
fn timedelta(duration: Duration) -> String {
    let total = duration.as_secs();
    let (days, rest) = (total / 86_400, total % 86_400);
    let (hours, minutes, secs) = (rest / 3600, rest % 3600 / 60, rest % 60);
    let micros = duration.subsec_micros();
    let mut text = String::new();
    if days > 0 {
        text.push_str(&format!("{days} day{}, ", if days == 1 { "" } else { "s" }));
    }
    text.push_str(&format!("{hours}:{minutes:02}:{secs:02}"));
    if micros > 0 {
        text.push_str(&format!(".{micros:06}"));
    }
    text
}

/// Evaluates a user's filter of the handler `id` (its `when`, or a label, annotation or value
/// callable) on an object. A panic is caught as a handler's is: logged as an error naming the
/// handler and the object, and taken as a mismatch, so that only this handler is skipped for
/// this state of the object; the object's other handlers and later events, and the other
/// objects, are processed as usual. Admission reviews do not skip: see [`checked_filter`].
pub(crate) fn filter(id: &str, object: &Value, check: impl FnOnce() -> bool) -> bool {
    checked_filter(
        id,
        object,
        "the handler is skipped for this state of the object",
        check,
    )
    .unwrap_or(false)
}

/// Evaluates a user's filter of the handler `id` on an object: whether it passes, or, when it
/// panics, the panic's message (logged as an error naming the handler, the object and
/// `consequence`: what the caller does about it).
pub(crate) fn checked_filter(
    id: &str,
    object: &Value,
    consequence: &str,
    check: impl FnOnce() -> bool,
) -> Result<bool, String> {
    match std::panic::catch_unwind(AssertUnwindSafe(check)) {
        Ok(passes) => Ok(passes),
        Err(panic) => {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let namespace = object["metadata"]["namespace"].as_str();
            let path = match namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.to_string(),
            };
            let message = panic_message(&panic);
            let span = tracing::error_span!(target: "kopf::handler", "handler", handler.id = %id, object.name = name, object.namespace = namespace);
            tracing::error!(target: "kopf::handler", parent: &span, "The filter of handler '{id}' panicked on {path}: {message}; {consequence}; fix the filter so that it returns instead");
            Err(message)
        }
    }
}

pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(message) = panic.downcast_ref::<&str>() {
        (*message).to_string()
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message.clone()
    } else {
        "(a non-string panic payload)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::posting::Poster;
    use crate::structs::resources::Resource;

    /// Keeps the messages of the events it sees.
    #[derive(Clone, Default)]
    struct Messages(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl tracing::field::Visit for Messages {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0.lock().unwrap().push(format!("{value:?}"));
            }
        }
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            if field.name() == "message" {
                self.0.lock().unwrap().push(value.to_string());
            }
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Messages {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            event.record(&mut self.clone());
        }
    }

    #[test]
    fn a_success_is_logged_in_kopfs_words_whatever_the_length_of_the_id() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let long = "h".repeat(2 * SUCCEEDED_ON_STACK);
        let messages = Messages::default();
        let subscriber = tracing_subscriber::registry().with(messages.clone());
        tracing::subscriber::with_default(subscriber, || {
            let body = serde_json::json!({"metadata": {"name": "n"}});
            let events = Poster::disabled().events(&body, &Resource::default());
            let logger = Logger::new(tracing::Span::none(), events);
            for (label, id, exiting) in [
                ("Handler", "create_fn", false),
                ("Daemon", "daemon_fn", true),
                ("Timer", long.as_str(), false),
                ("Daemon", long.as_str(), true),
            ] {
                let report = Report {
                    label,
                    id,
                    logger: &logger,
                    exiting,
                };
                report.succeeded();
            }
        });
        assert_eq!(
            *messages.0.lock().unwrap(),
            [
                "Handler 'create_fn' succeeded.".to_string(),
                "Daemon 'daemon_fn' succeeded.".to_string(),
                format!("Timer '{long}' succeeded."),
                format!("Daemon '{long}' succeeded."),
            ]
        );
    }

    #[test]
    fn durations_print_as_python_prints_them_in_kopfs_lines() {
        assert_eq!(seconds(Duration::from_secs(60)), "60");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(timedelta(Duration::from_secs(60)), "0:01:00");
        assert_eq!(timedelta(Duration::from_millis(60_250)), "0:01:00.250000");
        assert_eq!(
            timedelta(Duration::from_secs(86_400 + 7200)),
            "1 day, 2:00:00"
        );
        assert_eq!(
            timedelta(Duration::from_secs(3 * 86_400)),
            "3 days, 0:00:00"
        );
    }
}
