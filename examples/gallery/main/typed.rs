//! A typed custom resource with kube-derive; see `kopf_examples::gallery::typed`.
//!
//! ```sh
//! cargo run --example typed -- crd | kubectl apply -f -
//! cargo run --example typed
//! ```

use kopf_examples::gallery::typed::{self, Greeting};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run_with(kopf::handlers![typed::greet, typed::regreet].crd::<Greeting>()).await
}
