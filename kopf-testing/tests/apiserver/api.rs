//! The API's semantics through kube-rs: CRUD, lists, watches, CRDs, lifecycle, faults.
