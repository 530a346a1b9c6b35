//! Kopf's gallery: handlers chosen by filters; see `kopf_examples::gallery::filters`.

use kopf_examples::gallery::filters;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    kopf::run_with(kopf::handlers![
        filters::create_with_label_value,
        filters::create_with_label_present,
        filters::create_with_label_absent,
        filters::create_with_annotation_callable,
        filters::create_when_good_enough,
        filters::update_to_value,
    ])
    .await
}
