//! Running an operator against a fake API server (or a real one behind it) in a test, as Kopf's `KopfRunner` does: one
//! call starts a fresh server and the operator; helpers (those of the fake server's
//! `TestClient`) create objects, wait for conditions on them with a deadline; others show what
//! the operator sent and logged; [`OperatorHarness::stop`] stops the operator and checks that
//! it left nothing behind.
//!
//! ```no_run
//! # async fn example(registry: kopf::registry::Registry) {
//! use kopf_testing::OperatorHarness;
//! let harness = OperatorHarness::start(registry).await;
//! harness.apply(kopf_testing::fixtures::KOPFEXAMPLE_CRD).await; // waits until Established
//! harness.apply("{apiVersion: kopf.dev/v1, kind: KopfExample, metadata: {name: kex}}").await;
//! let object = harness
//!     .wait_for("kopfexamples", "default", "kex", |o| !o["status"].is_null())
//!     .await;
//! assert!(!harness.patches_to("kex").is_empty()); // what the operator sent to it
//! harness.stop().await.expect("a clean stop");
//! # }
//! ```
//!
//! The `#[kopf_testing::test]` attribute does the starting and stopping around a test's body.

mod apiserver;
mod builder;
mod campaign;
mod explore;
mod locks;
mod logs;
mod objects;
mod operator;
mod outcomes;
mod sent;

pub use apiserver::{
    APISERVER_VARIABLE, ApiServer, fake_only, service_account_client, service_account_config,
};
pub use builder::{HarnessBuilder, test_settings};
pub use campaign::{Mutation, Mutations};
pub use explore::{BadPlan, Exploration, Explorer, Outcome, Plan};
pub(crate) use logs::LogCapture;
pub use operator::OperatorHarness;
pub use sent::SentRequest;
