#![allow(unused_variables)]

#[kopf::timer("kopfexamples", idle = "10s")]
async fn no_interval() {}

#[kopf::timer("kopfexamples", interval = "1m", cancellation_backoff = "5s")]
async fn timer_with_a_daemons_option() {}

#[kopf::daemon("kopfexamples", interval = "1m", initial_delay = "soon")]
async fn daemon_with_a_timers_option() {}

#[kopf::daemon("kopfexamples")]
async fn wrong_stopped(stopped: bool, diff: &kopf::diff::Diff) {}

#[kopf::on_event("kopfexamples")]
async fn event_with_subhandlers(subhandlers: &kopf::registry::SubHandlers) {}

fn main() {}
