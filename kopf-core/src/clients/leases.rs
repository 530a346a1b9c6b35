//! Requests to `coordination.k8s.io/v1` Leases, for leader election and assigned shards: the
//! JSON sent and read whole, so that every write carries the resourceVersion that was read.

use serde_json::Value;

/// The path of the Leases of a namespace, or of one of them.
pub(crate) fn path(namespace: &str, name: Option<&str>) -> String {
    let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    match name {
        Some(name) => format!("{collection}/{name}"),
        None => collection,
    }
}

/// Sends one request with this JSON body (if any) and reads the JSON reply.
pub(crate) async fn send(
    client: &kube::Client,
    method: http::Method,
    uri: &str,
    body: Option<Value>,
) -> Result<Value, kube::Error> {
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(request).await
}
