#![allow(unused_variables)]

#[kopf::on_validate("kopfexamples")]
async fn validating_patch(patch: &mut kopf::Patch) {}

#[kopf::on_validate("kopfexamples", operations = [])]
async fn no_operations() {}

#[kopf::on_mutate("kopfexamples", operations = [CREATE, PATCH, CREATE])]
async fn odd_operations() {}

#[kopf::on_validate("kopfexamples", operations = CREATE)]
async fn operations_not_a_list() {}

#[kopf::on_validate("kopfexamples", errors = "permanent", timeout = 10, retries = 1, backoff = 5)]
async fn retrying_options() {}

#[kopf::on_mutate("kopfexamples", subresource = "")]
async fn empty_subresource() {}

#[kopf::on_create("kopfexamples", persistent, operations = [CREATE])]
async fn admission_options_elsewhere() {}

#[kopf::on_create("kopfexamples")]
async fn admission_arguments_elsewhere(warnings: &kopf::admission::Warnings, dryrun: bool) {}

#[kopf::on_validate("kopfexamples")]
async fn change_arguments(reason: kopf::Reason) {}

fn main() {}
