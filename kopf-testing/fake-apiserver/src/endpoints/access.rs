//! Who may do what: the bearer token says who a request comes from (authentication), and the
//! stored roles say whether they may do it (authorization), as kube-apiserver with
//! `--authorization-mode=RBAC` and anonymous requests allowed decides.
//!
//! Authentication, first, on every path:
//! - the admin token ([`FakeApiServerBuilder::token`](crate::FakeApiServerBuilder::token), or
//!   one made at start that [`FakeApiServer::config`](crate::FakeApiServer::config) and the
//!   kubeconfig carry) is the cluster's admin, `kubernetes-admin` in `system:masters`, who may
//!   impersonate anyone (`Impersonate-User` and `Impersonate-Group`, as `kubectl --as` sends
//!   them);
//! - a ServiceAccount's token (a JWT of `semantics::tokens`) is that account, while it is
//!   valid: signed by this server, for the API's audience, unexpired, and its account still
//!   there with the same uid;
//! - any other token is `401 Unauthorized`, even where no credentials are needed;
//! - a request without a token is `system:anonymous` in `system:unauthenticated` on a server
//!   that requires credentials (a token configured, or RBAC enforced). On one that requires
//!   none (the library's default: nothing configured), it is the admin: the fake server's
//!   convenience for tests that speak plain HTTP with no credentials, as kube-apiserver's old
//!   insecure port served everyone as the admin.
//!
//! Authorization, then:
//! - the admin may do anything;
//! - anonymous requests are always judged by RBAC (never the admin's rights): the bootstrap
//!   `system:public-info-viewer` role lets them read `/healthz`, `/livez`, `/readyz` and
//!   `/version`, and nothing else, so the rest is `403 Forbidden`, the control API under
//!   `/_fake/` included;
//! - ServiceAccounts are judged by RBAC when the server enforces it (their paths outside
//!   resources too: the bootstrap `system:discovery` role opens discovery and OpenAPI to every
//!   authenticated user), and may do anything otherwise; the control API stays closed to them
//!   under enforcement, as no role can name it.

use http::header;
use rand::Rng as _;

use super::control::lock;
use super::request::{Query, Route};
use crate::semantics::authorization::{self, Attributes, Identity};
use crate::semantics::status::{ApiError, ApiResult};
use crate::semantics::tokens::{ISSUER, Rejection, Signer};
use crate::storage::state::State;
use std::sync::Mutex;

/// The admin's token, whether credentials are required, whether ServiceAccounts' requests are
/// checked against RBAC, and the key that signs ServiceAccounts' tokens.
#[derive(Debug)]
pub(crate) struct Access {
    /// The admin's bearer token: the one configured, or one made at start.
    admin: String,
    /// Requests must carry credentials: a token was configured, or RBAC is enforced.
    required: bool,
    /// Check the requests of ServiceAccounts' tokens against the stored roles.
    enforce_rbac: bool,
    /// Signs and checks ServiceAccounts' tokens.
    signer: Signer,
}

impl Access {
    pub(crate) fn new(admin: Option<String>, enforce_rbac: bool) -> Access {
        Access {
            required: admin.is_some() || enforce_rbac,
            admin: admin.unwrap_or_else(random_token),
            enforce_rbac,
            signer: Signer::generate(),
        }
    }

    /// The admin's bearer token, which kubeconfigs and clients of the server carry.
    pub(crate) fn admin_token(&self) -> &str {
        &self.admin
    }

    /// Whether requests must carry credentials (without them, they are `system:anonymous`).
    pub(crate) fn required(&self) -> bool {
        self.required
    }

    /// The key of ServiceAccounts' tokens.
    pub(crate) fn signer(&self) -> &Signer {
        &self.signer
    }
}

/// A token nobody can guess: 128 random bits, in hex.
pub(crate) fn random_token() -> String {
    let bits: u128 = rand::rng().random();
    format!("{bits:032x}")
}

/// Authenticates the request, then authorizes it. Returns who it comes from, as reviews and
/// admission webhooks are told.
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
    let identity = match given {
        Some(token) if token == access.admin => {
            return Ok(impersonated(&request.headers).unwrap_or_else(Identity::admin));
        }
        Some(token) => {
            let api = [ISSUER.to_string()];
            match access.signer.authenticate(&lock(state), token, &api) {
                Ok((identity, _)) => identity,
                Err(rejection) => {
                    tracing::debug!(?rejection, "a bearer token did not authenticate");
                    return Err(ApiError::unauthorized());
                }
            }
        }
        None if !access.required => {
            return Ok(impersonated(&request.headers).unwrap_or_else(Identity::admin));
        }
        None => Identity::anonymous(),
    };
    if !access.enforce_rbac && !identity.is_anonymous() {
        return Ok(identity);
    }
    authorize(&lock(state), &identity, request, route, verb)?;
    Ok(identity)
}

/// Whether `who` may make this request, by the stored roles.
fn authorize(
    state: &State,
    who: &Identity,
    request: &http::request::Parts,
    route: &Route,
    verb: &str,
) -> ApiResult<()> {
    let path_verb = request.method.as_str().to_ascii_lowercase();
    let path = match route {
        Route::Object(path) => path,
        // No role can grant the control API: it is the fake server's, not Kubernetes'.
        Route::Control(_) => {
            return Err(authorization::forbidden_path(
                who,
                &path_verb,
                request.uri.path(),
            ));
        }
        _ if authorization::allows_path(state, who, &path_verb, request.uri.path()) => {
            return Ok(());
        }
        _ => {
            return Err(authorization::forbidden_path(
                who,
                &path_verb,
                request.uri.path(),
            ));
        }
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
    authorization::authorize(state, who, &attributes)
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

/// Who a bearer token authenticates as for one of `audiences` (a `TokenReview`), and which of
/// them it is good for. The admin's token is good for any.
pub(crate) fn review(
    access: &Access,
    state: &Mutex<State>,
    token: &str,
    audiences: &[String],
) -> Result<(Identity, Vec<String>), Rejection> {
    if token == access.admin {
        return Ok((Identity::admin(), audiences.to_vec()));
    }
    access.signer.authenticate(&lock(state), token, audiences)
}
