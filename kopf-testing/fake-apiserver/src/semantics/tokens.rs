//! ServiceAccount tokens as kube-apiserver issues and checks them: JWTs signed (ES256) by a key
//! the server makes at start, with the claims of a `TokenRequest`'s token (`iss`, `sub`, `aud`,
//! `exp`, `iat`, `nbf`, `jti`, and `kubernetes.io` with the namespace, the account's name and
//! uid, and the object the token is bound to, if any).
//!
//! A token authenticates, as in Kubernetes (`pkg/serviceaccount`), only if:
//! 1. it is a JWT of this server's issuer (other bearer tokens are not this authenticator's:
//!    no error, just not authenticated);
//! 2. its signature checks out with the server's key;
//! 3. one of its audiences is among those the request is for (the API server's own by default);
//! 4. it has not expired, nor is it valid only later (a minute of leeway either way);
//! 5. its account still exists with the uid it had when the token was issued (deleting the
//!    account, or deleting and re-creating it, ends its tokens), and so does the Pod, Secret or
//!    Node the token is bound to.
//!
//! The key lives as long as the server's process: a restarted process (the binary, a new
//! `FakeApiServer` on the same state file) has a new key, and the tokens of the old one stop
//! working, as after a rotation of a cluster's signing key.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::authorization::Identity;
use crate::storage::object;
use crate::storage::state::State;

/// The issuer (`iss`) of the tokens, and the audience the API server accepts them for
/// (`--service-account-issuer` and `--api-audiences` as kubeadm and kind set them).
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The leeway of every time check, as go-jose's (`jwt.DefaultLeeway`).
const LEEWAY_SECONDS: i64 = 60;

/// The DER prefix of a P-256 public key's `SubjectPublicKeyInfo`, before the 65 bytes of the
/// uncompressed point: the key id is the SHA-256 of the whole, as Kubernetes derives it.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The key that signs the tokens, made at start.
pub(crate) struct Signer {
    key: EcdsaKeyPair,
    key_id: String,
    random: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// The object a token is bound to (`spec.boundObjectRef` of a `TokenRequest`): the token
/// works only while it exists with this uid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    /// `Pod`, `Secret` or `Node`.
    pub(crate) kind: BoundKind,
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The kinds a token can be bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoundKind {
    Pod,
    Secret,
    Node,
}

impl BoundKind {
    /// The kind as a `boundObjectRef` names it.
    pub(crate) fn of(kind: &str) -> Option<BoundKind> {
        match kind {
            "Pod" => Some(BoundKind::Pod),
            "Secret" => Some(BoundKind::Secret),
            "Node" => Some(BoundKind::Node),
            _ => None,
        }
    }

    /// The claim's key under `kubernetes.io`, and the resource's plural.
    fn claim(self) -> &'static str {
        match self {
            BoundKind::Pod => "pod",
            BoundKind::Secret => "secret",
            BoundKind::Node => "node",
        }
    }

    fn plural(self) -> &'static str {
        match self {
            BoundKind::Pod => "pods",
            BoundKind::Secret => "secrets",
            BoundKind::Node => "nodes",
        }
    }
}

/// What a token is issued for.
#[derive(Debug, Clone)]
pub(crate) struct Grant<'a> {
    pub(crate) namespace: &'a str,
    /// The account's name.
    pub(crate) name: &'a str,
    /// The account's uid.
    pub(crate) uid: &'a str,
    pub(crate) audiences: &'a [String],
    /// Seconds from now until it expires.
    pub(crate) lifetime: i64,
    pub(crate) binding: Option<Binding>,
}

/// A token, and when it expires.
#[derive(Debug, Clone)]
pub(crate) struct Issued {
    pub(crate) token: String,
    pub(crate) expires: OffsetDateTime,
}

/// Why a bearer token does not authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// It is no token of this server's issuer: another authenticator's, or none at all.
    NotOurs,
    /// One of this server's tokens that is not (or no longer) valid; the message is the real
    /// server's (a `TokenReview` tells it in `status.error`).
    Invalid(String),
}

impl Signer {
    /// A new key.
    pub(crate) fn generate() -> Signer {
        let random = SystemRandom::new();
        let algorithm = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(algorithm, &random)
            .expect("the system's random generator makes a P-256 key");
        let key = EcdsaKeyPair::from_pkcs8(algorithm, pkcs8.as_ref(), &random)
            .expect("a freshly made P-256 key loads");
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(key.public_key().as_ref());
        let key_id = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Signer {
            key,
            key_id,
            random,
        }
    }

    /// A token for `grant`, issued now.
    pub(crate) fn issue(&self, grant: &Grant<'_>) -> Issued {
        self.issue_at(grant, OffsetDateTime::now_utc())
    }

    fn issue_at(&self, grant: &Grant<'_>, now: OffsetDateTime) -> Issued {
        let expires = now + time::Duration::seconds(grant.lifetime);
        let mut kubernetes = json!({"namespace": grant.namespace});
        if let Some(binding) = &grant.binding {
            kubernetes[binding.kind.claim()] = json!({"name": binding.name, "uid": binding.uid});
        }
        kubernetes["serviceaccount"] = json!({"name": grant.name, "uid": grant.uid});
        // The claims in the order go-jose writes them (sorted by name).
        let claims = json!({
            "aud": grant.audiences,
            "exp": expires.unix_timestamp(),
            "iat": now.unix_timestamp(),
            "iss": ISSUER,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": kubernetes,
            "nbf": now.unix_timestamp(),
            "sub": format!("system:serviceaccount:{}:{}", grant.namespace, grant.name),
        });
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .key
            .sign(&self.random, signed.as_bytes())
            .expect("signing with a loaded key works");
        Issued {
            token: format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())),
            expires,
        }
    }

    /// Who `token` authenticates as for a request meant for one of `audiences`, and which of
    /// them the token is for.
    pub(crate) fn authenticate(
        &self,
        state: &State,
        token: &str,
        audiences: &[String],
    ) -> Result<(Identity, Vec<String>), Rejection> {
        self.authenticate_at(state, token, audiences, OffsetDateTime::now_utc())
    }

    fn authenticate_at(
        &self,
        state: &State,
        token: &str,
        audiences: &[String],
        now: OffsetDateTime,
    ) -> Result<(Identity, Vec<String>), Rejection> {
        let (header, claims, signed, signature) = parse(token).ok_or(Rejection::NotOurs)?;
        if claims["iss"] != ISSUER {
            return Err(Rejection::NotOurs);
        }
        let invalid = |message: &str| Rejection::Invalid(message.to_string());
        if header["kid"].as_str().is_some_and(|kid| kid != self.key_id) {
            return Err(invalid("invalid signature, no keys found"));
        }
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.key.public_key().as_ref(),
        );
        if header["alg"] != "ES256" || public.verify(signed, &signature).is_err() {
            return Err(invalid("go-jose/go-jose: error in cryptographic primitive"));
        }
        let token_audiences = strings(&claims["aud"]);
        let granted: Vec<String> = token_audiences
            .iter()
            .filter(|audience| audiences.contains(audience))
            .cloned()
            .collect();
        if granted.is_empty() {
            return Err(Rejection::Invalid(format!(
                "token audiences {} is invalid for the target audiences {}",
                go_quoted(&token_audiences),
                go_quoted(audiences)
            )));
        }
        let now = now.unix_timestamp();
        let time = |claim: &str| claims[claim].as_i64();
        if time("nbf").is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
            return Err(invalid("service account token is not valid yet"));
        }
        if time("exp").is_some_and(|exp| now - LEEWAY_SECONDS > exp) {
            return Err(invalid("service account token has expired"));
        }
        if time("iat").is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
            return Err(invalid("service account token is issued in the future"));
        }
        let private = &claims["kubernetes.io"];
        let namespace = private["namespace"].as_str().unwrap_or_default();
        let name = private["serviceaccount"]["name"]
            .as_str()
            .unwrap_or_default();
        let uid = private["serviceaccount"]["uid"]
            .as_str()
            .unwrap_or_default();
        let account = state
            .get(
                &(String::new(), "serviceaccounts".to_string()),
                &(namespace.to_string(), name.to_string()),
            )
            .ok_or_else(|| Rejection::Invalid(format!("serviceaccounts \"{name}\" not found")))?;
        if object::uid(account) != uid {
            return Err(Rejection::Invalid(format!(
                "service account UID ({}) does not match claim ({uid})",
                object::uid(account)
            )));
        }
        if deleted_before(account, now - LEEWAY_SECONDS) {
            return Err(Rejection::Invalid(format!(
                "service account {namespace}/{name} has been deleted"
            )));
        }
        let mut identity = Identity::service_account(namespace, name);
        identity.uid = Some(uid.to_string());
        identity.extra.push((
            "authentication.kubernetes.io/credential-id".to_string(),
            format!("JTI={}", claims["jti"].as_str().unwrap_or_default()),
        ));
        for kind in [BoundKind::Pod, BoundKind::Secret, BoundKind::Node] {
            let bound = &private[kind.claim()];
            if bound.is_null() {
                continue;
            }
            let bound_name = bound["name"].as_str().unwrap_or_default();
            let bound_uid = bound["uid"].as_str().unwrap_or_default();
            let namespace = if kind == BoundKind::Node {
                ""
            } else {
                namespace
            };
            let found = state.get(
                &(String::new(), kind.plural().to_string()),
                &(namespace.to_string(), bound_name.to_string()),
            );
            match found {
                None => return Err(invalid("service account token has been invalidated")),
                Some(object) if object::uid(object) != bound_uid => {
                    return Err(Rejection::Invalid(format!(
                        "{kind} UID ({}) does not match service account {kind} ref claim ({bound_uid})",
                        object::uid(object),
                        kind = kind.claim(),
                    )));
                }
                Some(object) if deleted_before(object, now - LEEWAY_SECONDS) => {
                    return Err(invalid("service account token has been invalidated"));
                }
                Some(_) => {}
            }
            let key =
                |field: &str| format!("authentication.kubernetes.io/{}-{field}", kind.claim());
            if kind != BoundKind::Secret {
                identity.extra.push((key("name"), bound_name.to_string()));
                identity.extra.push((key("uid"), bound_uid.to_string()));
            }
        }
        Ok((identity, granted))
    }

    /// The JSON Web Key Set that verifies the tokens (`/openid/v1/jwks`).
    pub(crate) fn key_set(&self) -> Value {
        let point = self.key.public_key().as_ref();
        json!({"keys": [{
            "use": "sig",
            "kty": "EC",
            "kid": self.key_id,
            "crv": "P-256",
            "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }]})
    }

    /// The OpenID provider configuration (`/.well-known/openid-configuration`), with the key
    /// set at `jwks_uri`.
    pub(crate) fn discovery(&self, jwks_uri: &str) -> Value {
        json!({
            "issuer": ISSUER,
            "jwks_uri": jwks_uri,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }
}

/// The header, the claims, the signed part and the signature of a compact JWS.
fn parse(token: &str) -> Option<(Value, Value, &[u8], Vec<u8>)> {
    let mut parts = token.split('.');
    let (header, claims, signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).ok();
    let json = |part: &str| serde_json::from_slice::<Value>(&decode(part)?).ok();
    let signed = &token.as_bytes()[..header.len() + 1 + claims.len()];
    Some((json(header)?, json(claims)?, signed, decode(signature)?))
}

/// An `aud` claim: one string, or a list of them.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(one) => vec![one.clone()],
        Value::Array(many) => many
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_quoted(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Whether the object has been marked for deletion before `moment` (Unix seconds).
fn deleted_before(object: &Value, moment: i64) -> bool {
    object["metadata"]["deletionTimestamp"]
        .as_str()
        .and_then(|at| {
            OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
        })
        .is_some_and(|at| at.unix_timestamp() < moment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semantics::lifecycle;

    fn state_with_account() -> (State, String) {
        let mut state = State::new(100);
        let namespaces = state.catalog.get("", "namespaces").unwrap().clone();
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
        lifecycle::create(&mut state, &namespaces, namespace, None).unwrap();
        let accounts = state.catalog.get("", "serviceaccounts").unwrap().clone();
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot", "namespace": "default"}});
        let created = lifecycle::create(&mut state, &accounts, account, None).unwrap();
        let uid = object::uid(&created).to_string();
        (state, uid)
    }

    fn api() -> Vec<String> {
        vec![ISSUER.to_string()]
    }

    fn grant<'a>(uid: &'a str, audiences: &'a [String]) -> Grant<'a> {
        Grant {
            namespace: "default",
            name: "bot",
            uid,
            audiences,
            lifetime: 600,
            binding: None,
        }
    }

    #[test]
    fn a_token_carries_the_real_claims_and_authenticates_as_its_account() {
        let (state, uid) = state_with_account();
        let signer = Signer::generate();
        let audiences = api();
        let issued = signer.issue(&grant(&uid, &audiences));
        let (_, claims, _, _) = parse(&issued.token).unwrap();
        let keys: Vec<&str> = claims
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "aud",
                "exp",
                "iat",
                "iss",
                "jti",
                "kubernetes.io",
                "nbf",
                "sub"
            ]
        );
        assert_eq!(claims["sub"], "system:serviceaccount:default:bot");
        assert_eq!(
            claims["kubernetes.io"]["serviceaccount"]["uid"],
            uid.as_str()
        );
        assert_eq!(
            claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
            600
        );
        let (identity, granted) = signer
            .authenticate(&state, &issued.token, &audiences)
            .unwrap();
        assert_eq!(identity.user, "system:serviceaccount:default:bot");
        assert_eq!(identity.uid.as_deref(), Some(uid.as_str()));
        assert_eq!(granted, audiences);
    }

    #[test]
    fn an_expired_token_is_refused_after_the_leeway_only() {
        let (state, uid) = state_with_account();
        let signer = Signer::generate();
        let audiences = api();
        let issued_at = OffsetDateTime::now_utc() - time::Duration::seconds(700);
        let issued = signer.issue_at(&grant(&uid, &audiences), issued_at);
        let at = |seconds: i64| issued_at + time::Duration::seconds(seconds);
        assert!(
            signer
                .authenticate_at(&state, &issued.token, &audiences, at(600 + 59))
                .is_ok()
        );
        assert_eq!(
            signer
                .authenticate_at(&state, &issued.token, &audiences, at(600 + 61))
                .unwrap_err(),
            Rejection::Invalid("service account token has expired".into())
        );
        assert_eq!(
            signer
                .authenticate(&state, &issued.token, &audiences)
                .unwrap_err(),
            Rejection::Invalid("service account token has expired".into())
        );
        assert_eq!(
            signer
                .authenticate_at(&state, &issued.token, &audiences, at(-61))
                .unwrap_err(),
            Rejection::Invalid("service account token is not valid yet".into())
        );
    }

    #[test]
    fn a_forged_or_foreign_token_is_refused() {
        let (state, uid) = state_with_account();
        let signer = Signer::generate();
        let other = Signer::generate();
        let audiences = api();
        let theirs = other.issue(&grant(&uid, &audiences)).token;
        assert_eq!(
            signer
                .authenticate(&state, &theirs, &audiences)
                .unwrap_err(),
            Rejection::Invalid("invalid signature, no keys found".into())
        );
        // The same claims, re-signed by another key under this server's key id.
        let ours = signer.issue(&grant(&uid, &audiences)).token;
        let (head, _) = ours.rsplit_once('.').unwrap();
        let (_, their_signature) = theirs.rsplit_once('.').unwrap();
        let forged = format!("{head}.{their_signature}");
        assert_eq!(
            signer
                .authenticate(&state, &forged, &audiences)
                .unwrap_err(),
            Rejection::Invalid("go-jose/go-jose: error in cryptographic primitive".into())
        );
        for garbage in ["", "s3cret", "a.b.c", "kopf-fake-sa.default.bot"] {
            assert_eq!(
                signer
                    .authenticate(&state, garbage, &audiences)
                    .unwrap_err(),
                Rejection::NotOurs
            );
        }
    }

    #[test]
    fn a_token_for_another_audience_is_refused_for_the_api() {
        let (state, uid) = state_with_account();
        let signer = Signer::generate();
        let vault = vec!["vault".to_string()];
        let token = signer.issue(&grant(&uid, &vault)).token;
        assert_eq!(
            signer.authenticate(&state, &token, &api()).unwrap_err(),
            Rejection::Invalid(format!(
                "token audiences [\"vault\"] is invalid for the target audiences [\"{ISSUER}\"]"
            ))
        );
        assert!(signer.authenticate(&state, &token, &vault).is_ok());
    }

    #[test]
    fn go_quotes_lists_of_strings_as_go_does() {
        assert_eq!(go_quoted(&[]), "[]");
        assert_eq!(
            go_quoted(&["a".to_string(), "b\"c".to_string()]),
            "[\"a\" \"b\\\"c\"]"
        );
    }
}
