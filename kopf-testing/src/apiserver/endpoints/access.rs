//! Who may do what: the bearer token says who a request comes from (authentication), and, with
//! RBAC enforcement on, the stored roles say whether they may do it (authorization).
//!
//! Tokens:
//! - the admin token ([`FakeApiServerBuilder::token`](crate::FakeApiServerBuilder::token)),
//!   or no token when none is required, has full access;
//! - tokens issued for ServiceAccounts
//!   ([`FakeApiServer::service_account_token`](crate::FakeApiServer::service_account_token))
//!   act as those accounts: with enforcement on, each of their requests on a resource is
//!   checked against the roles bound to the account (`semantics::authorization`); without it,
//!   they have full access too;
//! - any other token is `401 Unauthorized` when the admin token is required or enforcement
//!   is on.
//!
//! Health and control (`/_fake/`) paths need no token; paths outside resources (discovery,
//! `/version`, OpenAPI) are open to every authenticated user, as Kubernetes'
//! `system:discovery` role makes them.

use std::collections::HashMap;
use std::sync::Mutex;

use http::header;

use super::control::lock;
use super::request::Route;
use crate::apiserver::semantics::authorization::{self, Attributes, Identity};
use crate::apiserver::semantics::status::{ApiError, ApiResult};
use crate::apiserver::storage::state::State;

/// The tokens, and whether ServiceAccounts' requests are checked against RBAC.
#[derive(Debug, Default)]
pub(crate) struct Access {
    /// The admin token, when one is required.
    admin: Option<String>,
    /// Check the requests of ServiceAccounts' tokens against the stored roles.
    enforce_rbac: bool,
    /// Issued tokens and whose they are.
    tokens: Mutex<HashMap<String, Identity>>,
}

impl Access {
    pub(crate) fn new(admin: Option<String>, enforce_rbac: bool) -> Access {
        Access {
            admin,
            enforce_rbac,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// A token that acts as the ServiceAccount `namespace/name` (the same one each time).
    pub(crate) fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = format!("kopf-fake-sa.{namespace}.{name}");
        lock(&self.tokens).insert(token.clone(), Identity::service_account(namespace, name));
        token
    }
}

/// Authenticates the request and, for ServiceAccounts under enforcement, authorizes it.
pub(crate) fn check(
    access: &Access,
    state: &Mutex<State>,
    headers: &http::HeaderMap,
    route: &Route,
    verb: &str,
) -> ApiResult<()> {
    if matches!(route, Route::Health | Route::Control(_)) {
        return Ok(());
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let account = given.and_then(|token| lock(&access.tokens).get(token).cloned());
    let Some(identity) = account else {
        let admin = match &access.admin {
            Some(token) => given == Some(token.as_str()),
            None => given.is_none() || !access.enforce_rbac,
        };
        return if admin {
            Ok(())
        } else {
            Err(ApiError::unauthorized())
        };
    };
    let Route::Object(path) = route else {
        return Ok(());
    };
    if !access.enforce_rbac {
        return Ok(());
    }
    let namespace = if path.plural == "namespaces" && path.group.is_empty() {
        path.name.as_deref()
    } else {
        path.namespace.as_deref()
    };
    let attributes = Attributes {
        verb,
        group: &path.group,
        resource: &path.plural,
        subresource: path.subresource.as_deref(),
        namespace,
        name: path.name.as_deref(),
    };
    authorization::authorize(&lock(state), &identity, &attributes)
}

/// Who a request comes from, as reviews report it: the ServiceAccount of an issued token, or
/// the cluster's admin (`kubernetes-admin` in `system:masters`), who may impersonate anyone
/// (`Impersonate-User` and `Impersonate-Group`, as `kubectl --as` sends them).
pub(crate) fn identify(access: &Access, headers: &http::HeaderMap) -> Identity {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(identity) = given.and_then(|token| lock(&access.tokens).get(token).cloned()) {
        return identity;
    }
    let impersonated = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok());
    let Some(user) = impersonated else {
        return Identity::admin();
    };
    let groups = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    Identity::named(user, groups)
}

/// Who a bearer token authenticates as, for a `TokenReview`: `None` for an unknown token.
pub(crate) fn authenticate(access: &Access, token: &str) -> Option<Identity> {
    if let Some(identity) = lock(&access.tokens).get(token).cloned() {
        return Some(identity);
    }
    (access.admin.as_deref() == Some(token)).then(Identity::admin)
}
