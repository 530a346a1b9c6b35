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
//! Open and closed paths, as on a cluster:
//! - the health checks (`/healthz`, `/livez`, `/readyz`) and `/version` are open to requests
//!   with no token (Kubernetes' `system:public-info-viewer` role grants them to
//!   `system:unauthenticated`); a token the server does not know is `401` there too, as
//!   authentication comes before authorization;
//! - every other path needs the admin token when one is required, the control API under
//!   `/_fake/` included: whoever may reach the objects may steer the server, no one else;
//! - paths outside resources (discovery, OpenAPI) are open to every authenticated user, as
//!   Kubernetes' `system:discovery` role makes them; the control API is not, under RBAC
//!   enforcement: a ServiceAccount gets `403` there, as for a path no rule grants.

use std::collections::HashMap;
use std::sync::Mutex;

use http::header;

use super::control::lock;
use super::request::{Query, Route};
use crate::semantics::authorization::{self, Attributes, Identity};
use crate::semantics::status::{ApiError, ApiResult};
use crate::storage::state::State;

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
/// Returns who it comes from, as reviews report it: the ServiceAccount of an issued token, or
/// the cluster's admin (`kubernetes-admin` in `system:masters`), who may impersonate anyone
/// (`Impersonate-User` and `Impersonate-Group`, as `kubectl --as` sends them).
pub(crate) fn check(
    access: &Access,
    state: &Mutex<State>,
    request: &http::request::Parts,
    route: &Route,
    verb: &str,
) -> ApiResult<Identity> {
    let given = request
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let public = matches!(route, Route::Health | Route::Version);
    let account = given.and_then(|token| lock(&access.tokens).get(token).cloned());
    let Some(identity) = account.map(|identity| identity.authenticated(&lock(state))) else {
        let admin = match &access.admin {
            Some(token) => given == Some(token.as_str()),
            None => given.is_none() || !access.enforce_rbac,
        };
        return if admin || (public && given.is_none()) {
            Ok(impersonated(&request.headers).unwrap_or_else(Identity::admin))
        } else {
            Err(ApiError::unauthorized())
        };
    };
    if !access.enforce_rbac {
        return Ok(identity);
    }
    let path = match route {
        Route::Object(path) => path,
        Route::Control(_) => {
            let verb = request.method.as_str().to_ascii_lowercase();
            return Err(authorization::forbidden_path(
                &identity,
                &verb,
                request.uri.path(),
            ));
        }
        _ => return Ok(identity),
    };
    let namespace = if path.plural == "namespaces" && path.group.is_empty() {
        path.name.as_deref()
    } else {
        path.namespace.as_deref()
    };
    // As kube-apiserver's RequestInfo: a list or watch selecting one name by field is a
    // request for that name, which `resourceNames` may allow.
    let selected = match (verb, &path.name) {
        ("list" | "watch", None) => selected_name(request.uri.query()),
        _ => None,
    };
    let attributes = Attributes {
        verb,
        group: &path.group,
        resource: &path.plural,
        subresource: path.subresource.as_deref(),
        namespace,
        name: path.name.as_deref().or(selected.as_deref()),
    };
    authorization::authorize(&lock(state), &identity, &attributes)?;
    Ok(identity)
}

/// The name that a query's `fieldSelector` selects alone (`metadata.name=NAME` or `==`), as
/// kube-apiserver reads it for authorization.
fn selected_name(query: Option<&str>) -> Option<String> {
    let query = Query::parse(query);
    let selector = query.get("fieldSelector")?;
    let name = selector
        .strip_prefix("metadata.name==")
        .or_else(|| selector.strip_prefix("metadata.name="))?;
    (!name.is_empty() && !name.contains(',')).then(|| name.to_string())
}

/// The user the admin acts as, when the request impersonates one.
fn impersonated(headers: &http::HeaderMap) -> Option<Identity> {
    let user = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())?;
    let groups = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    Some(Identity::named(user, groups))
}

/// Who a bearer token authenticates as, for a `TokenReview`: `None` for an unknown token.
pub(crate) fn authenticate(access: &Access, token: &str) -> Option<Identity> {
    if let Some(identity) = lock(&access.tokens).get(token).cloned() {
        return Some(identity);
    }
    (access.admin.as_deref() == Some(token)).then(Identity::admin)
}
