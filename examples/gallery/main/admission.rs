//! Kopf's gallery: admission webhooks; see `kopf_examples::gallery::admission`.

use kopf_examples::gallery::admission;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run_with(admission::registry()).await
}
