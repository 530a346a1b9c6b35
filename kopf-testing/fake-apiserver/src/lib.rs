//! A fake Kubernetes API server in memory on 127.0.0.1, real enough that unmodified kubectl,
//! kube-rs, the Python `kubernetes` client and Python Kopf work against it: discovery, CRDs,
//! CRUD, watches with bookmarks and `410 Gone`, selectors, all patch types, the status
//! subresource, finalizers and garbage collection. Tests can count requests, inject faults,
//! close watches, compact the history, and restart it.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use kopf_fake_apiserver::{FakeApiServer, fixtures};
//!
//! let server = FakeApiServer::start().await?;
//! let client = server.client(); // a kube::Client for it
//! server.apply(fixtures::KOPFEXAMPLE_CRD).await; // waits until the CRD is established
//! let (status, _) = server.request("GET", fixtures::KOPFEXAMPLES, None).await;
//! assert_eq!(status, 200);
//! # Ok(()) }
//! ```
//!
//! Tests talk to it (or to a real kube-apiserver) through a [`TestClient`]: requests
//! answered with their status and JSON, objects applied from YAML and waited for by the names
//! kubectl knows, all with one generous [`DEADLINE`]; `FakeApiServer` has the same helpers
//! (`server.apply(..)`, `server.request(..)`, `server.wait_for(..)`). [`fixtures`] holds what
//! tests share: Kopf's `KopfExample` resource, its CRD and objects.
//!
//! It calls the admission webhooks that Validating- and MutatingWebhookConfigurations register,
//! as kube-apiserver does: on creations, updates, patches (of objects and of their `status`,
//! `scale` and other subresources) and deletions, over HTTPS trusted by each webhook's
//! `caBundle`, with their rules, selectors, match conditions, failure policies, timeouts,
//! reinvocation and dry-run rules, and the real error messages. Webhooks are called at their
//! `url` (`https://127.0.0.1:<port>/...`); a `service` reference cannot be reached (there is
//! no cluster network behind Services), so its calls fail and its `failurePolicy` decides.
//! Subresources whose objects are of another kind are admitted with those objects, as
//! kube-apiserver does: a `Scale` on `<resource>/scale`, a `Binding` on `pods/binding`, an
//! `Eviction` on `pods/eviction` (so webhooks can refuse evictions). Not admitted: the writes
//! of the server's own controllers (garbage collection, namespace cleanup).
//!
//! Who may do what is decided as kube-apiserver decides it: the admin's bearer token (given to
//! [`FakeApiServerBuilder::token`], or made at start; [`FakeApiServer::client`] and every
//! kubeconfig written carry it) is the cluster's admin; ServiceAccount tokens are JWTs signed by
//! a key made at start, for an audience, with an expiry, valid only while their account exists
//! with the same uid (`TokenRequest`s, `TokenReview`s and the issuer's
//! `/.well-known/openid-configuration` and `/openid/v1/jwks` are served); any other token is
//! `401`; a request without credentials is `system:anonymous`, whom the bootstrap roles let
//! read `/healthz`, `/livez`, `/readyz` and `/version` only. RBAC decides for ServiceAccounts
//! when [enforced](FakeApiServerBuilder::enforce_rbac).
//!
//! Two conveniences of the library set it apart from a cluster, on purpose: it serves plain
//! HTTP unless asked for [TLS](FakeApiServerBuilder::tls), and, when no credentials are
//! configured (no token, no RBAC enforcement), a request without credentials acts as the
//! admin. In-process tests then pay no handshake per connection and can speak raw HTTP/1.1 to
//! it, and kubectl works with its kubeconfig over plain HTTP (client-go sends no credentials
//! there). The `kopf-fake-apiserver` binary behaves as a cluster instead: HTTPS, a token
//! required, plain HTTP only with `--insecure-http`.
//!
//! Deletions answer what kube-apiserver 1.36's storage answers: the deleted object for the
//! kinds whose storage sets `ReturnDeletedObject` (pods, Services, ServiceAccounts, namespaces,
//! persistent volumes and claims, pod templates, resource quotas, and the `storage.k8s.io` and
//! `resource.k8s.io` kinds), a `Status` naming it for the others (custom resources,
//! ConfigMaps, Secrets, workloads, ...), and the object marked for deletion while finalizers
//! hold it. The kubelet's subresources of pods answer as on a cluster whose pods no kubelet
//! runs: `pods/log` is empty (`204`) for a pod on no node; `exec`, `attach` and `portforward`
//! are `400 pod NAME does not have a host assigned`.
//!
//! It depends on nothing of kopf: it is a Kubernetes server, not an operator. `kopf-testing`
//! re-exports it beside the harness that runs operators against it. The
//! `kopf-fake-apiserver` binary runs the same server for kubectl and other processes.
//!
//! # The layers
//!
//! The folders are layers, bottom up; each uses only the layers below it, and no modules use
//! each other (`tests/layers.rs` keeps both rules):
//!
//! - `storage`: what the server holds: the catalog of served resources (the built-in ones,
//!   read from k8s-openapi's metadata of its types, and those CRDs define, with their printer
//!   columns), objects' metadata, the `State` (objects,
//!   the global resourceVersion, and the change history that watches replay), and the state
//!   file (its log format, replay and compaction, and the queue of writes waiting for it), and
//!   the files only their owner may read.
//! - `semantics`: Kubernetes' rules, with no HTTP in them: ServiceAccount tokens, RBAC
//!   authorization, `Status` errors, names, selectors,
//!   schemas (pruning, defaulting, validation, structural checks, CEL rules), patches,
//!   admission with the built-in kinds' defaults and limits, admission webhooks (which a
//!   request reaches, the reviews they get, what their answers mean), the lifecycle of objects and the
//!   addresses allocated to them, above it the controllers a cluster runs behind the API
//!   (`controllers::settle`: CRD establishment, namespace termination, garbage collection,
//!   what every namespace gets) and what a cluster boots with (`cluster`), tables, protobuf
//!   bodies, and Go's rendering of values in messages.
//! - `endpoints`: the HTTP face: requests parsed into routes, queries and formats (the request's
//!   `Context`), replies, what every handler shares (the state behind its lock, the counters and
//!   fault rules tests see and steer, the tokens that end connections and watches), the
//!   calls of admission webhooks over HTTPS (`webhooks`), the endpoints for resources, discovery and the `/_fake/` control API, and the router above
//!   them.
//! - `server`: the process: the listener and its connections (with their TLS handshake and
//!   the certificates made at start, when asked; bounded by a header timeout and a cap of
//!   connections, `slots`), `FakeApiServer` and its builder, restarts, and the task that
//!   saves every write to the state file before it is answered.
//! - `client`: the test's side, which knows the server only as a URL and a `kube::Client`:
//!   [`TestClient`] (requests, objects, waits; for any API server, this one or a real one),
//!   and the same helpers on `FakeApiServer`.
//! - `fixtures`: what tests share: Kopf's `KopfExample` CRD and objects.
//!
//! A request's path: `server::listener` accepts the connection (`server::tls` shakes hands
//! first on a TLS server) and hands each request to
//! `endpoints::router`, which parses its route and verb, authenticates and (with RBAC
//! enforced) authorizes it (`endpoints::access`), counts it, fires the
//! faults injected for it, and passes it to `discovery`, `control_api` or `resources::verbs`.
//! There a verb resolves its `Target` against the catalog; a write parses the body (JSON,
//! protobuf, or YAML for an apply), applies a patch (`semantics::patch`), admits the object
//! (`semantics::admission`, with `semantics::schema` for custom resources, between the
//! mutating and the validating webhooks that `endpoints::webhooks` calls without holding the
//! state's lock; the write then commits only if the object did not change meanwhile, else it
//! starts again, as kube-apiserver's `GuaranteedUpdate`) and stores it by
//! Kubernetes' rules (`semantics::lifecycle`) in `storage::state` through `Shared::write`,
//! which then runs the cluster's controllers and wakes the watches (`resources::watch`) to
//! replay the new changes from the history; with a state file, it queues the changes for
//! `server::saving` instead, which wakes the watches once they are fsync'd. The answer is a
//! `Reply`, or a `Status` error, sent once the state file (if any) holds what it shows; the
//! router logs it.

mod client;
mod endpoints;
pub mod fixtures;
mod real;
mod semantics;
mod server;
mod storage;

pub use client::{
    Answer, ApiRequest, DEADLINE, PatchType, RequestError, TestClient, try_wait, wait,
};
pub use endpoints::control::{Breach, Fault, FaultAction, LoggedRequest, Stats};
pub use endpoints::holding::HeldWrite;
pub use real::{LAUNCHER_VARIABLE, RealApiServer, RealApiServerError};
pub use server::{Committed, FakeApiServer, FakeApiServerBuilder, RecreateError};
