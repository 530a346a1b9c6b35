//! The chaos suite: kopf-rs under faults and crashes, and the proof that nothing is lost.
//!
//! The chaos operator (`chaos-operator`, a few handlers that log every call) runs as a child
//! process against kopf-testing's fake API server. A [`run`](run::run) creates objects,
//! resizes them and deletes them while the server injects faults into the operator's
//! requests (writes that land but answer 500 or nothing, writes refused, watches cut, lists
//! shuffled or served from a lagging view) and the operator is killed with SIGKILL at one of
//! its writes (held by the server, after or before it lands) and started again. Then
//! [`invariants::check`] reads the server's journal and the call log and says what, if
//! anything, was lost.
//!
//! - The fast tier runs in `cargo test --workspace` (`verification/chaos/tests/chaos.rs`): every crash
//!   point of a small scenario, and a scenario with every fault and several kills.
//! - The long tier is one command, which prints the README's table:
//!
//!   ```sh
//!   cargo run --release -p kopf-chaos --bin chaos -- --objects 1000 --seeds 3 --kills 10
//!   ```

pub mod calls;
pub mod invariants;
pub mod resource;
pub mod run;
