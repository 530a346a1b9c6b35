//! The test's side, above the servers: a client of any API server (this fake one or a real
//! kube-apiserver) with the requests, objects and waits that tests make, the same helpers on
//! `FakeApiServer` itself, and such a client of a `RealApiServer`.

mod fake_server;
mod objects;
mod real_server;
mod requests;
mod resolutions;
mod test_client;
mod waiting;

pub use requests::{Answer, ApiRequest, PatchType, RequestError};
pub use test_client::TestClient;
pub use waiting::{DEADLINE, try_wait, wait};
