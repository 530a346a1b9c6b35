//! How long the operator's requests may take (Kopf's `settings.networking.request_timeout`
//! and `settings.watching`'s `client_timeout` and `connect_timeout`), applied to every request
//! of the operator's one client (`clients/auth.rs`). kube-client sets no read timeout: without
//! these, an answer lost on the way stalls whatever waits for it (a write holding a permit, a
//! Lease's renewal or hand-off, a listing) for as long as the connection lives.
//!
//! Invariants:
//! 1. A request (but a watch or a stream) is answered, its body read to the end, within the
//!    request timeout, or it fails with [`TimedOut`]: its connection is dropped, and the
//!    caller retries it as a lost connection.
//! 2. A watch begins (its answer's head arrives) within the watch's connect timeout, or fails
//!    with [`TimedOut`]; a watch stream that began ends, as cleanly as a server's timeout ends
//!    it, once the watch's client timeout has passed.
//! 3. Streams that are not watches (logs followed, `exec`, `attach`, port-forwarding: what
//!    handlers open through their `client`) are not bounded: they last as long as their user
//!    wants.
//! 4. The limits are read as each request is sent: a startup handler's change of the settings
//!    applies to the requests sent after it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use kube::client::Body;
use tokio::time::{Instant, Sleep};

use crate::configs::settings::Settings;
use crate::helpers::sync::lock;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The limits of the operator's requests, as the settings give them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Requests but watches and streams: from sending to the end of the answer.
    request: Option<Duration>,
    /// Connecting to the API server, for the clients that the operator makes.
    connect: Option<Duration>,
    /// Watches: until the stream begins.
    watch_connect: Option<Duration>,
    /// Watches: until the operator ends the stream.
    watch_client: Option<Duration>,
    /// Not a time: whether the clients that the operator makes use the environment's proxy
    /// (Kopf's `trust_env`), read with `connect` as they are made.
    trust_env: bool,
}

impl Limits {
    /// The limits that the settings give, with Kopf's fallbacks: a watch begins within the
    /// watching connect timeout, or else the networking one, or else the request timeout.
    pub(crate) fn of(settings: &Settings) -> Limits {
        let (networking, watching) = (&settings.networking, &settings.watching);
        Limits {
            request: networking.request_timeout,
            connect: networking.connect_timeout,
            watch_connect: watching
                .connect_timeout
                .or(networking.connect_timeout)
                .or(networking.request_timeout),
            watch_client: watching.client_timeout,
            trust_env: networking.trust_env,
        }
    }
}

/// The operator's limits, shared by its client and changed when the settings change.
#[derive(Debug, Clone, Default)]
pub(crate) struct Timeouts(Arc<Mutex<Limits>>);

impl Timeouts {
    /// The limits of these settings.
    pub(crate) fn new(settings: &Settings) -> Timeouts {
        Timeouts(Arc::new(Mutex::new(Limits::of(settings))))
    }

    /// Applies these settings to the requests sent from now on.
    pub(crate) fn set(&self, settings: &Settings) {
        *lock(&self.0) = Limits::of(settings);
    }

    /// How long connecting may take, for a client made now.
    pub(crate) fn connect(&self) -> Option<Duration> {
        lock(&self.0).connect
    }

    /// Whether the clients that the operator makes use the environment's proxy.
    pub(crate) fn trust_env(&self) -> bool {
        lock(&self.0).trust_env
    }

    /// How this request is bounded.
    pub(crate) fn bounds<B>(&self, request: &Request<B>) -> Bounds {
        let limits = *lock(&self.0);
        match Kind::of(request) {
            Kind::Request => Bounds {
                head: limits.request.map(|limit| (limit, REQUEST)),
                body: limits.request.map(|limit| (limit, Some(REQUEST))),
            },
            Kind::Watch => Bounds {
                head: limits.watch_connect.map(|limit| (limit, WATCH_CONNECT)),
                body: limits.watch_client.map(|limit| (limit, None)),
            },
            Kind::Stream => Bounds::default(),
        }
    }
}

/// The kinds of requests, as their bounds differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Watch,
    Stream,
}

impl Kind {
    fn of<B>(request: &Request<B>) -> Kind {
        if request.headers().contains_key(http::header::UPGRADE) {
            return Kind::Stream;
        }
        let query = request.uri().query().unwrap_or_default();
        let flag = |name: &str| {
            query.split('&').any(|pair| {
                pair.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix('='))
                    .is_some_and(|value| value == "true" || value == "1")
            })
        };
        if flag("watch") {
            Kind::Watch
        } else if flag("follow") {
            Kind::Stream
        } else {
            Kind::Request
        }
    }
}

/// The setting that a timeout comes from, as its error names it.
const REQUEST: &str = "settings.networking.request_timeout";
const WATCH_CONNECT: &str = "settings.watching.connect_timeout, or else settings.networking's connect_timeout or request_timeout";

/// A request, or a watch's beginning, took longer than its settings allow.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the API server did not answer within {limit:?} ({setting})")]
pub(crate) struct TimedOut {
    limit: Duration,
    setting: &'static str,
}

/// How one request is bounded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bounds {
    /// Until its answer's head arrives.
    head: Option<(Duration, &'static str)>,
    /// Until its answer's body ends, from when it was sent: with an error (named by its
    /// setting), or cleanly (`None`).
    body: Option<(Duration, Option<&'static str>)>,
}

impl Bounds {
    /// Sends the request through `sending`, within these bounds: its answer's body is
    /// bounded too.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future drops the request (its connection closes).
    pub(crate) async fn apply(
        self,
        sending: impl Future<Output = Result<Response<Body>, BoxError>>,
    ) -> Result<Response<Timed>, BoxError> {
        let sent = Instant::now();
        let answered = match self.head {
            Some((limit, setting)) => tokio::time::timeout(limit, sending)
                .await
                .map_err(|_| TimedOut { limit, setting })?,
            None => sending.await,
        }?;
        let end = self.body.map(|(limit, setting)| End {
            timer: Box::pin(tokio::time::sleep_until(sent + limit)),
            error: setting.map(|setting| TimedOut { limit, setting }),
        });
        Ok(answered.map(|body| Timed { body, end }))
    }
}

/// An answer's body that ends at its request's deadline: with an error, or cleanly.
pub(crate) struct Timed {
    body: Body,
    end: Option<End>,
}

/// When and how a [`Timed`] body ends.
struct End {
    timer: Pin<Box<Sleep>>,
    /// The error to end with; none to end cleanly.
    error: Option<TimedOut>,
}

impl HttpBody for Timed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Some(end) = &mut this.end
            && end.timer.as_mut().poll(context).is_ready()
        {
            let error = end.error.take();
            this.end = None;
            this.body = Body::empty();
            return Poll::Ready(error.map(|error| Err(error.into())));
        }
        Pin::new(&mut this.body)
            .poll_frame(context)
            .map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;
    use http_body_util::{BodyExt as _, StreamBody};

    fn settings(request: u64, watch_connect: Option<u64>, watch_client: Option<u64>) -> Settings {
        let mut settings = Settings::default();
        settings.networking.request_timeout = Some(Duration::from_secs(request));
        settings.watching.connect_timeout = watch_connect.map(Duration::from_secs);
        settings.watching.client_timeout = watch_client.map(Duration::from_secs);
        settings
    }

    fn request(uri: &str) -> Request<()> {
        Request::get(uri).body(()).unwrap()
    }

    type Frames = futures::stream::BoxStream<'static, Result<Frame<Bytes>, BoxError>>;

    /// A server whose answers send their first bytes, then nothing more, ever.
    struct Endless;

    impl tower_service::Service<Request<Body>> for Endless {
        type Response = Response<StreamBody<Frames>>;
        type Error = BoxError;
        type Future = std::future::Ready<Result<Self::Response, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<Body>) -> Self::Future {
            let first = futures::stream::once(async { Ok(Frame::data(Bytes::from_static(b"{"))) });
            let frames: Frames = first.chain(futures::stream::pending()).boxed();
            std::future::ready(Ok(Response::new(StreamBody::new(frames))))
        }
    }

    /// The answer of [`Endless`] to `uri`, within the bounds of these settings.
    async fn answer(settings: &Settings, uri: &str) -> Response<Timed> {
        let bounds = Timeouts::new(settings).bounds(&request(uri));
        let client = kube::Client::new(Endless, "default");
        let request = Request::get(uri).body(Body::empty()).unwrap();
        bounds
            .apply(async move { Ok(client.send(request).await?) })
            .await
            .expect("answered")
    }

    #[test]
    fn watches_and_streams_are_told_from_requests() {
        let of = |uri: &str| Kind::of(&request(uri));
        assert_eq!(of("/api/v1/pods"), Kind::Request);
        assert_eq!(of("/api/v1/pods?watch=true&resourceVersion=1"), Kind::Watch);
        assert_eq!(of("/api/v1/pods?labelSelector=watch%3Dtrue"), Kind::Request);
        assert_eq!(of("/api/v1/pods?watch=false"), Kind::Request);
        assert_eq!(
            of("/api/v1/namespaces/a/pods/b/log?follow=true"),
            Kind::Stream
        );
        let mut exec = request("/api/v1/namespaces/a/pods/b/exec?command=sh");
        exec.headers_mut()
            .insert(http::header::UPGRADE, "websocket".parse().unwrap());
        assert_eq!(Kind::of(&exec), Kind::Stream);
    }

    #[test]
    fn a_watch_begins_within_kopfs_fallbacks() {
        let head = |s: &Settings| {
            let bounds = Timeouts::new(s).bounds(&request("/x?watch=1"));
            bounds.head.map(|(limit, _)| limit)
        };
        let s = Duration::from_secs;
        assert_eq!(head(&settings(300, None, None)), Some(s(300)));
        let mut connecting = settings(300, None, None);
        connecting.networking.connect_timeout = Some(s(7));
        assert_eq!(head(&connecting), Some(s(7)));
        assert_eq!(head(&settings(300, Some(3), None)), Some(s(3)));
        let mut unbounded = Settings::default();
        unbounded.networking.request_timeout = None;
        assert_eq!(head(&unbounded), None, "as Kopf's None");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_request_times_out() {
        let timeouts = Timeouts::new(&settings(30, None, None));
        let bounds = timeouts.bounds(&request("/api/v1/pods"));
        let started = Instant::now();
        let error = bounds
            .apply(std::future::pending())
            .await
            .err()
            .expect("timed out");
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert!(error.to_string().contains("within 30s"), "{error}");
        assert!(error.to_string().contains("request_timeout"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_whose_body_does_not_end_times_out() {
        let started = Instant::now();
        let answer = answer(&settings(30, None, None), "/api/v1/pods").await;
        let error = answer.into_body().collect().await.expect_err("timed out");
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(30),
            "counted from the sending"
        );
        assert!(error.to_string().contains("request_timeout"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_ends_cleanly_after_its_client_timeout() {
        let started = Instant::now();
        let answer = answer(&settings(30, None, Some(600)), "/x?watch=true").await;
        let read = answer.into_body().collect().await.expect("ended cleanly");
        assert_eq!(read.to_bytes(), Bytes::from_static(b"{"));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(600),
            "longer than requests"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn streams_and_watches_without_a_client_timeout_last() {
        for uri in [
            "/x?watch=true",
            "/api/v1/namespaces/a/pods/b/log?follow=true",
        ] {
            let answer = answer(&settings(30, None, None), uri).await;
            let reading = answer.into_body().collect();
            let hour = Duration::from_secs(3600);
            assert!(tokio::time::timeout(hour, reading).await.is_err(), "{uri}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn changed_settings_apply_to_the_next_requests() {
        let timeouts = Timeouts::new(&settings(30, None, None));
        let bounds = timeouts.bounds(&request("/api/v1/pods"));
        timeouts.set(&settings(5, None, None));
        assert_eq!(
            bounds.head.map(|(limit, _)| limit),
            Some(Duration::from_secs(30))
        );
        let next = timeouts.bounds(&request("/api/v1/pods"));
        assert_eq!(
            next.head.map(|(limit, _)| limit),
            Some(Duration::from_secs(5))
        );
    }
}
