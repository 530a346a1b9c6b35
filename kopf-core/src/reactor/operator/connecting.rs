//! The operator's client at the start of a run: logged in with the login handlers, the
//! embedder's, or kube-client's default.

use std::sync::Arc;

use super::errors::OperatorError;
use crate::aiokits::connections::Connections;
use crate::aiokits::tasks::Tasks;
use crate::clients::auth::{self, Login};
use crate::clients::timeouts::Timeouts;
use crate::engines::authentication::{Authenticator, Given};
use crate::intents::login::LoginHandler;

/// The operator's client at the start of `run()`: logged in with the login handlers if there
/// are any; else the embedder's client, or kube-client's default (kubeconfig or in-cluster).
/// Wrapped for the metrics when the tree counts them. With kube-client's default, also the API
/// server's URL (the cluster detection of `WebhookServer::auto` reads its certificate).
pub(crate) async fn connect(
    explicit: Option<kube::Client>,
    logins: Vec<LoginHandler>,
    tasks: &Tasks,
    connections: &Connections,
    timeouts: &Timeouts,
    given: Given,
) -> std::result::Result<(kube::Client, Option<http::Uri>), OperatorError> {
    let metrics = tasks.metrics().cloned();
    let mut url = None;
    let login = if !logins.is_empty() {
        let authenticator = Authenticator::new(
            logins,
            tasks.child(),
            connections.clone(),
            timeouts.clone(),
            given,
        );
        Login::Handlers(Arc::new(authenticator))
    } else {
        match explicit {
            Some(client) => Login::Fixed(client),
            None => {
                let (client, cluster) = crate::structs::credentials::default_client(
                    connections.clone(),
                    timeouts.connect(),
                    timeouts.trust_env(),
                )
                .await
                .map_err(OperatorError::Client)?;
                url = Some(cluster);
                Login::Fixed(client)
            }
        }
    };
    let client = auth::client(login, metrics, timeouts.clone())
        .await
        .map_err(OperatorError::Login)?;
    Ok((client, url))
}
