#![allow(unused_variables)]

use kopf_testing::OperatorHarness;

#[kopf_testing::test]
fn not_async(harness: OperatorHarness) {}

#[kopf_testing::test(handler = [create_fn], crds = [])]
async fn unknown_option(harness: OperatorHarness) {}

#[kopf_testing::test]
async fn two_arguments(harness: OperatorHarness, name: &str) {}

#[kopf_testing::test]
async fn generic<T>(harness: OperatorHarness) {}

fn main() {}
