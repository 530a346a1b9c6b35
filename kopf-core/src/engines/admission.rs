//! Serving admission reviews (Kopf's `serve_admission_request`): the webhook server hands each
//! call to [`Admission::review`], which reads the `AdmissionReview`, selects the validating
//! and mutating handlers it concerns, runs them once, all at once, and answers with their
//! decision, warnings and patch.
//!
//! The steps of one review:
//! 1. [`request::parse`] checks the body: bad JSON or a review without `userInfo`, or with
//!    neither `object` nor `oldObject`, is a `400`.
//! 2. The resource of `request.resource` is found among the resources the operator serves
//!    (`404` when no admission handler serves it, `409` when it is ambiguous).
//! 3. The handlers: only the one of the id in the URL path, if any; mutating handlers skip
//!    `DELETE` unless it is their only operation; then their filters (subresource, labels,
//!    annotations, field and value, `when`). A filter that panics fails the review with a
//!    `500` (as an exception does in Kopf), so the webhook's failurePolicy decides.
//! 4. Each runs once with errors treated as permanent, never retried; any failure denies.
//! 5. [`response::build`]: the first error of the best rank explains the denial; the mutating
//!    handlers' patch becomes a base64 JSON patch.
//!
//! A decision is always HTTP 200; nothing in a request makes this code panic (the tests feed it
//! malformed bodies).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt as _;
use serde_json::{Value, json};

use crate::actions::execution::{self, Kind, Outcome};
use crate::actions::invocation::{ErrorsMode, HandlerFn, Invocation, Options, SubHandlers};
use crate::aiokits::tasks::Tasks;
use crate::clients::posting::{Logger, Poster};
use crate::helpers::sync::lock;
use crate::intents::admission::{AdmissionHandler, AdmissionKind};
use crate::intents::registry::{Registry, deduplicated};
use crate::structs::bodies::Body;
use crate::structs::certificates::PeerCertificate;
use crate::structs::diff::diff;
use crate::structs::errors::ErrorKind;
use crate::structs::filters::{match_field_value, match_metadata};
use crate::structs::indexes::Indexes;
use crate::structs::memos::{Memo, ObjectMemos};
use crate::structs::resources::Resource;
use crate::structs::reviews::{Operation, Review, Warnings};

mod request;
mod response;
#[cfg(test)]
mod tests;

use request::{RequestError, ReviewRequest};
use response::{Failure, Rank};

/// One call of the webhook server, as it received it.
#[derive(Debug, Clone)]
pub(crate) struct WebhookRequest {
    /// The `AdmissionReview`, as sent.
    pub(crate) body: bytes::Bytes,
    /// The path segment after the server's path: the id of the one handler to run.
    pub(crate) handler_id: Option<String>,
    pub(crate) headers: http::HeaderMap,
    /// The DER of the client's certificate, if it sent one.
    pub(crate) peer_certificate: Option<Vec<u8>>,
}

/// The server's answer to one call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WebhookResponse {
    pub(crate) status: http::StatusCode,
    /// An `AdmissionReview` with a `response` (status 200), or a `Status` saying what is wrong
    /// with the request.
    pub(crate) body: Value,
}

/// What serves admission reviews: the operator's admission handlers with what they get.
/// Clones share everything.
#[derive(Clone)]
pub(crate) struct Admission {
    inner: Arc<Inner>,
}

struct Inner {
    handlers: Vec<AdmissionHandler>,
    client: Arc<kube::Client>,
    tasks: Tasks,
    memo: Memo,
    /// The memos of the objects the operator watches.
    memos: ObjectMemos,
    indexes: Indexes,
    poster: Poster,
    /// The resources the cluster serves, once discovered; until then (and in tests), the
    /// resource is taken from the request as it is.
    resources: Option<tokio::sync::watch::Receiver<Vec<Resource>>>,
}

impl Admission {
    /// Serves the registry's admission handlers; their invocations are nodes under `tasks`
    /// and make API calls with `client`.
    pub(crate) fn new(registry: &Registry, client: kube::Client, tasks: Tasks) -> Admission {
        Admission {
            inner: Arc::new(Inner {
                handlers: registry.admissions.clone(),
                client: Arc::new(client),
                tasks,
                memo: Memo::new(),
                memos: ObjectMemos::default(),
                indexes: Indexes::default(),
                poster: Poster::disabled(),
                resources: None,
            }),
        }
    }

    /// The operator's memo, from which objects' memos are copied.
    pub(crate) fn memo(self, memo: Memo) -> Admission {
        self.with(|inner| inner.memo = memo)
    }

    /// The objects' memos that the operator's processors keep (without: a copy of the
    /// operator's memo for every call).
    pub(crate) fn memos(self, memos: ObjectMemos) -> Admission {
        self.with(|inner| inner.memos = memos)
    }

    /// The operator's indexes.
    pub(crate) fn indexes(self, indexes: Indexes) -> Admission {
        self.with(|inner| inner.indexes = indexes)
    }

    /// Where handlers' events and logs-as-events go.
    pub(crate) fn poster(self, poster: Poster) -> Admission {
        self.with(|inner| inner.poster = poster)
    }

    /// The resources the cluster serves, as discovery finds them.
    pub(crate) fn resources(
        self,
        resources: tokio::sync::watch::Receiver<Vec<Resource>>,
    ) -> Admission {
        self.with(|inner| inner.resources = Some(resources))
    }

    fn with(self, change: impl FnOnce(&mut Inner)) -> Admission {
        let mut inner = Arc::try_unwrap(self.inner).unwrap_or_else(|shared| Inner {
            handlers: shared.handlers.clone(),
            client: shared.client.clone(),
            tasks: shared.tasks.clone(),
            memo: shared.memo.clone(),
            memos: shared.memos.clone(),
            indexes: shared.indexes.clone(),
            poster: shared.poster.clone(),
            resources: shared.resources.clone(),
        });
        change(&mut inner);
        Admission {
            inner: Arc::new(inner),
        }
    }

    /// Judges one admission review.
    ///
    /// # Cancellation safety
    ///
    /// Dropping the future drops the handlers' calls in flight (sync handlers finish on their
    /// threads); nothing is written anywhere, so a dropped review has no effect.
    pub(crate) async fn review(&self, request: WebhookRequest) -> WebhookResponse {
        match self.judge(request).await {
            Ok(body) => WebhookResponse {
                status: http::StatusCode::OK,
                body,
            },
            Err(error) => {
                tracing::warn!(target: "kopf::admission", "Rejected an admission request: {}", error.message);
                WebhookResponse {
                    status: error.status,
                    body: status_body(&error),
                }
            }
        }
    }

    async fn judge(&self, call: WebhookRequest) -> Result<Value, RequestError> {
        let request = request::parse(&call.body)?;
        let resource = self.resource(&request)?;
        let review = Arc::new(Review {
            operation: request.operation,
            subresource: request.subresource.clone(),
            dryrun: request.dryrun,
            userinfo: request.userinfo.clone(),
            headers: headers(&call.headers),
            sslpeer: call
                .peer_certificate
                .as_deref()
                .and_then(PeerCertificate::from_der),
            warnings: Warnings::default(),
        });
        let body = Arc::new(Body::from(request.body().clone()));
        // As Kopf: a throwaway memo on creation (the object does not exist yet), the object's
        // own otherwise. Unlike Kopf, an object the operator does not watch gets a throwaway
        // one too: keeping memos of objects whose deletion is never seen would grow forever.
        let uid = body["metadata"]["uid"].as_str().unwrap_or_default();
        let memo = match request.operation {
            Operation::Create => None,
            _ => self.inner.memos.get(uid),
        }
        .unwrap_or_else(|| self.inner.memo.shallow_copy());
        let mutations = SubHandlers::default();
        let calls = Calls {
            admission: self,
            request: &request,
            resource: &resource,
            review: &review,
            body: &body,
            memo: &memo,
            mutations: &mutations,
        };
        let mut selected: Vec<&AdmissionHandler> = Vec::new();
        for handler in &self.inner.handlers {
            if calls.selects(handler, call.handler_id.as_deref())? {
                selected.push(handler);
            }
        }
        // As Kopf: one function stacked under several admission attributes that all select
        // the request is called once for it.
        let selected = deduplicated(selected, |handler| *handler);
        if let Some(id) = &call.handler_id
            && !self.inner.handlers.iter().any(|handler| handler.id == *id)
        {
            tracing::warn!(target: "kopf::admission", "An admission request for the unknown handler {id:?} is allowed: no handler has this id");
        }
        let failures: Vec<Failure> =
            futures::future::join_all(selected.iter().map(|handler| calls.run(handler)))
                .await
                .into_iter()
                .flatten()
                .collect();
        let patch = mutations.take_patch();
        let (operations, failures) = match response::json_patch(&body, &patch) {
            Ok(operations) => (operations, failures),
            Err(message) => {
                let mut failures = failures;
                failures.push(Failure {
                    rank: Rank::Other,
                    message,
                    code: None,
                });
                (Vec::new(), failures)
            }
        };
        Ok(response::build(
            &request,
            &failures,
            &review.warnings.to_vec(),
            &operations,
        ))
    }

    /// The served resource that the review is about (Kopf's `find_resource`).
    fn resource(&self, request: &ReviewRequest) -> Result<Resource, RequestError> {
        let requested = format!(
            "{{'group': {:?}, 'version': {:?}, 'resource': {:?}}}",
            request.group, request.version, request.plural
        );
        let candidates: Vec<Resource> = match &self.inner.resources {
            Some(resources) => resources
                .borrow()
                .iter()
                .filter(|r| {
                    r.group == request.group
                        && r.version == request.version
                        && r.plural == request.plural
                })
                .cloned()
                .collect(),
            None => vec![Resource {
                group: request.group.clone(),
                version: request.version.clone(),
                plural: request.plural.clone(),
                kind: request.object_kind.clone(),
                namespaced: request.namespace.is_some(),
                preferred: true,
                ..Resource::default()
            }],
        };
        let served: Vec<Resource> = candidates
            .into_iter()
            .filter(|resource| {
                self.inner
                    .handlers
                    .iter()
                    .any(|handler| handler.selector.check(resource))
            })
            .collect();
        match <[Resource; 1]>::try_from(served) {
            Ok([resource]) => Ok(resource),
            Err(served) if served.is_empty() => Err(RequestError {
                status: http::StatusCode::NOT_FOUND,
                message: format!("The specified resource has no handlers: {requested}"),
            }),
            Err(_) => Err(RequestError {
                status: http::StatusCode::CONFLICT,
                message: format!("The specified resource is ambiguous: {requested}"),
            }),
        }
    }
}

/// What the handlers of one review share.
struct Calls<'a> {
    admission: &'a Admission,
    request: &'a ReviewRequest,
    resource: &'a Resource,
    review: &'a Arc<Review>,
    body: &'a Arc<Body>,
    memo: &'a Memo,
    /// What the mutating handlers' calls gather, shared by them: one patch for all (Kopf's
    /// cause has one); admission handlers register no sub-handlers.
    mutations: &'a SubHandlers,
}

impl Calls<'_> {
    /// Whether the handler judges this review (Kopf's `WebhooksRegistry.iter_handlers`); a
    /// filter that panics fails the whole review (as an exception does in Kopf), so that the
    /// webhook's failurePolicy decides rather than the handler being skipped and the request
    /// admitted.
    fn selects(
        &self,
        handler: &AdmissionHandler,
        hint: Option<&str>,
    ) -> Result<bool, RequestError> {
        Ok(hint.is_none_or(|id| id == handler.id)
            && handler.selector.check(self.resource)
            && handler.serves_operation(self.request.operation)
            && handler.serves_subresource(self.request.subresource.as_deref())
            && self.passes_filters(handler)?)
    }

    fn passes_filters(&self, handler: &AdmissionHandler) -> Result<bool, RequestError> {
        let options = &handler.options;
        let body = &**self.body;
        let checked = |check: &dyn Fn() -> bool| {
            execution::checked_filter(&handler.id, body, "the admission review fails", check)
                .map_err(|message| RequestError {
                    status: http::StatusCode::INTERNAL_SERVER_ERROR,
                    message: format!(
                        "the filter of the admission handler {:?} panicked: {message}",
                        handler.id
                    ),
                })
        };
        let passes = checked(&|| {
            match_metadata(&options.labels, &options.annotations, body)
                && options
                    .field
                    .as_ref()
                    .is_none_or(|field| match_field_value(field, options.value.as_ref(), body))
        })?;
        Ok(passes
            && match &options.when {
                Some(when) => checked(&|| when(&self.invocation(handler, None)))?,
                None => true,
            })
    }

    /// The invocation of a handler; its patch goes to `gathered` (a throwaway when `None`).
    fn invocation(&self, handler: &AdmissionHandler, gathered: Option<SubHandlers>) -> Invocation {
        let inner = &self.admission.inner;
        let events = inner.poster.events(self.body, self.resource);
        let span = tracing::info_span!(target: "kopf::handler", "handler", handler.id = %handler.id, object.name = self.body["metadata"]["name"].as_str(), object.namespace = self.request.namespace.as_deref(), operation = %self.request.operation);
        let (old, new) = (
            self.request.old_object.clone().map(Arc::new),
            self.request.object.clone().map(Arc::new),
        );
        Invocation {
            body: self.body.clone(),
            resource: Arc::new(self.resource.clone()),
            reason: None,
            event_type: None,
            diff: Some(Arc::new(diff(old.as_deref(), new.as_deref()))),
            old,
            new,
            retry: 0,
            started: time::OffsetDateTime::now_utc(),
            param: handler.options.param.clone(),
            client: inner.client.clone(),
            node: inner.tasks.child(),
            logger: Logger::new(span, events.clone()),
            events,
            memo: self.memo.clone(),
            indexes: inner.indexes.clone(),
            gathered: gathered.unwrap_or_default(),
            counted_as: None,
            review: Some(self.review.clone()),
            live: None,
            settings: None,
        }
    }

    /// Runs the handler once; its failure, if it failed.
    async fn run(&self, handler: &AdmissionHandler) -> Option<Failure> {
        let gathered = match handler.kind {
            AdmissionKind::Mutating => Some(self.mutations.clone()),
            AdmissionKind::Validating => None,
        };
        let invocation = self.invocation(handler, gathered);
        let failure: Arc<Mutex<Option<Failure>>> = Arc::default();
        let function = capturing(&handler.function, failure.clone());
        // As Kopf: errors are permanent, and the handler runs once.
        let options = Options {
            errors: ErrorsMode::Permanent,
            timeout: None,
            retries: None,
            backoff: None,
            ..handler.options.clone()
        };
        let outcome = execution::execute_as(
            Kind::Handler,
            &handler.id,
            &function,
            &options,
            Duration::ZERO,
            invocation,
        )
        .await;
        let captured = lock(&failure).take();
        match outcome {
            Outcome::Success(_) => None,
            // An error the handler returned, or a panic (the message of the outcome).
            Outcome::Failure(message, _) | Outcome::Retry { message, .. } => {
                Some(captured.unwrap_or(Failure {
                    rank: Rank::Other,
                    message,
                    code: None,
                }))
            }
            Outcome::Aborted => Some(Failure {
                rank: Rank::Other,
                message: format!(
                    "the handler {:?} was stopped: the operator is exiting",
                    handler.id
                ),
                code: None,
            }),
        }
    }
}

/// The handler's function, keeping aside the error it returns (the outcome keeps only the
/// message), ranked as Kopf ranks it.
fn capturing(function: &HandlerFn, failure: Arc<Mutex<Option<Failure>>>) -> HandlerFn {
    let function = function.clone();
    Arc::new(move |invocation| {
        let call = function(invocation);
        let failure = failure.clone();
        Box::pin(async move {
            // A panic is reported as the handler's own failure (not the log line of it), then
            // goes on to be logged as any panic of a handler.
            let result = match std::panic::AssertUnwindSafe(call).catch_unwind().await {
                Ok(result) => result,
                Err(panic) => {
                    *lock(&failure) = Some(Failure {
                        rank: Rank::Other,
                        message: format!(
                            "the handler panicked: {}",
                            execution::panic_message(&panic)
                        ),
                        code: None,
                    });
                    std::panic::resume_unwind(panic);
                }
            };
            if let Err(error) = &result {
                let rank = match (error.admission_code(), error.kind()) {
                    (Some(_), _) => Rank::Admission,
                    (None, ErrorKind::Permanent) => Rank::Permanent,
                    (None, ErrorKind::Temporary(_)) => Rank::Temporary,
                    (None, _) => Rank::Other,
                };
                let message = error.to_string();
                // Kopf's `str(error) or repr(error)`.
                let message = if message.is_empty() {
                    let kind = match rank {
                        Rank::Admission => "AdmissionError",
                        Rank::Permanent => "PermanentError",
                        Rank::Temporary => "TemporaryError",
                        Rank::Other => "Error",
                    };
                    format!("{kind}('')")
                } else {
                    message
                };
                *lock(&failure) = Some(Failure {
                    rank,
                    message,
                    code: error.admission_code(),
                });
            }
            result
        })
    })
}

/// Serves one review with a registry's admission handlers, outside of an operator: the engine
/// tests' way in (the operator's webhook server calls [`Admission::review`]).
pub(crate) async fn review_once(
    registry: &Registry,
    client: kube::Client,
    memo: Memo,
    request: WebhookRequest,
) -> WebhookResponse {
    let tasks = Tasks::root(4);
    let admission = Admission::new(registry, client, tasks.clone()).memo(memo);
    let response = admission.review(request).await;
    tasks.cancel(crate::aiokits::tasks::StopReason::OperatorExiting);
    response
}

/// The call's headers by lower-case name; repeated headers joined by `, `, values that are
/// not text left out.
fn headers(map: &http::HeaderMap) -> BTreeMap<String, String> {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in map {
        let Ok(value) = value.to_str() else { continue };
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    headers
}

/// A Kubernetes `Status` saying what is wrong with a request that is no review.
fn status_body(error: &RequestError) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": error.message,
        "reason": error.status.canonical_reason().unwrap_or_default().replace(' ', ""),
        "code": error.status.as_u16(),
    })
}
