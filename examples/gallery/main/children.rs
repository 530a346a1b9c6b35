//! Kopf's gallery: children with owner references; see `kopf_examples::gallery::children`.

use kopf_examples::gallery::children;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run_with(kopf::handlers![children::create_fn]).await
}
