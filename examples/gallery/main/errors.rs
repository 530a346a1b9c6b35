//! Kopf's gallery: errors and retries; see `kopf_examples::gallery::errors`.

use kopf_examples::gallery::errors;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run_with(kopf::handlers![
        errors::instant_failure_with_only_a_message,
        errors::eventual_success_with_few_messages,
        errors::eventual_failure_with_tracebacks,
        errors::instant_failure_with_traceback,
    ])
    .await
}
