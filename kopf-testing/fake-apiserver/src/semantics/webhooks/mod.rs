//! Admission webhooks as kube-apiserver calls them, without the HTTP: the webhooks that
//! configurations register, which of them a request reaches, the `AdmissionReview` they are
//! sent and how their answers are checked, and the errors a request fails with because of
//! them. The calls themselves are made by `endpoints::webhooks`.

mod configuration;
mod matching;
mod review;
#[cfg(test)]
mod tests;

pub(crate) use configuration::{Endpoint, FailurePolicy, Phase, Webhook, is_exempt, registered};
pub(crate) use matching::{Attributes, Operation, conditions_hold};
pub(crate) use review::{
    Verdict, call_failure, denial, failed_conditions, no_dry_run, patch_without_object,
    record_warnings, request, review, review_version, unusable_patch, verdict,
};
