//! What a request asks for: its route, its query parameters, and the formats it accepts.

use std::collections::HashMap;

use http::{HeaderMap, Method};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    Resources {
        group: String,
        version: String,
    },
    /// `/openapi/v3`
    OpenApiV3,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`
    OpenApiV3Doc {
        group: String,
        version: String,
    },
    /// `/openapi/v2` (not served as protobuf; kubectl uses v3)
    OpenApiV2,
    /// `/healthz`, `/livez`, `/readyz`
    Health,
    /// `/.well-known/openid-configuration`: the discovery document of the ServiceAccount
    /// tokens' issuer.
    OpenIdConfiguration,
    /// `/openid/v1/jwks`: the keys that verify ServiceAccount tokens.
    OpenIdKeys,
    /// `/_fake/...`: the control API for tests.
    Control(String),
    Object(ObjectPath),
    NotFound,
}

/// A path to a collection, an object or a subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObjectPath {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) namespace: Option<String>,
    pub(crate) plural: String,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
}

impl Route {
    pub(crate) fn parse(path: &str) -> Route {
        let segments: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        match segments.as_slice() {
            ["version"] => Route::Version,
            ["healthz" | "livez" | "readyz", ..] => Route::Health,
            [".well-known", "openid-configuration"] => Route::OpenIdConfiguration,
            ["openid", "v1", "jwks"] => Route::OpenIdKeys,
            ["_fake", rest @ ..] => Route::Control(rest.join("/")),
            ["api"] => Route::CoreVersions,
            ["apis"] => Route::Groups,
            ["apis", group] => Route::Group(group.to_string()),
            ["openapi", "v3"] => Route::OpenApiV3,
            ["openapi", "v3", "api", version] => Route::OpenApiV3Doc {
                group: String::new(),
                version: version.to_string(),
            },
            ["openapi", "v3", "apis", group, version] => Route::OpenApiV3Doc {
                group: group.to_string(),
                version: version.to_string(),
            },
            ["openapi", "v2"] => Route::OpenApiV2,
            ["api", version, rest @ ..] => Self::resource("", version, rest),
            ["apis", group, version, rest @ ..] => Self::resource(group, version, rest),
            _ => Route::NotFound,
        }
    }

    fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
        let path =
            |namespace: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
                Route::Object(ObjectPath {
                    group: group.into(),
                    version: version.into(),
                    namespace: namespace.map(String::from),
                    plural: plural.into(),
                    name: name.map(String::from),
                    subresource: sub.map(String::from),
                })
            };
        match rest {
            [] => Route::Resources {
                group: group.into(),
                version: version.into(),
            },
            ["namespaces", ns, sub @ ("status" | "finalize")] if group.is_empty() => {
                path(None, "namespaces", Some(ns), Some(sub))
            }
            ["namespaces", ns, plural] => path(Some(ns), plural, None, None),
            ["namespaces", ns, plural, name] => path(Some(ns), plural, Some(name), None),
            ["namespaces", ns, plural, name, sub] => path(Some(ns), plural, Some(name), Some(sub)),
            [plural] => path(None, plural, None, None),
            [plural, name] => path(None, plural, Some(name), None),
            [plural, name, sub] => path(None, plural, Some(name), Some(sub)),
            _ => Route::NotFound,
        }
    }
}

/// The verb of a request, as Kubernetes counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    Other,
}

impl Verb {
    /// The verb of a request on `path`: a POST creates in a collection, or on a subresource
    /// of an object (`pods/NAME/eviction`, `serviceaccounts/NAME/token`).
    pub(crate) fn of(method: &Method, path: &ObjectPath, query: &Query) -> Verb {
        let has_name = path.name.is_some();
        match (method.as_str(), has_name) {
            ("GET", _) if query.flag("watch") => Verb::Watch,
            ("GET", true) => Verb::Get,
            ("GET", false) => Verb::List,
            ("POST", false) => Verb::Create,
            ("POST", true) if path.subresource.is_some() => Verb::Create,
            ("PUT", true) => Verb::Update,
            ("PATCH", true) => Verb::Patch,
            ("DELETE", true) => Verb::Delete,
            ("DELETE", false) => Verb::DeleteCollection,
            _ => Verb::Other,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Other => "other",
        }
    }
}

/// Query parameters, last value wins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query(HashMap<String, String>);

impl Query {
    pub(crate) fn parse(query: Option<&str>) -> Query {
        Query(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean parameter as Kubernetes reads it: absent, `0` and `false` (in any case) are
    /// false; anything else is true (Python clients send `watch=True`).
    pub(crate) fn flag(&self, key: &str) -> bool {
        self.0
            .get(key)
            .is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    pub(crate) fn number(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|v| v.parse().ok())
    }
}

/// What the client accepts in return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    /// `meta.k8s.io/v1` Table (kubectl get).
    Table,
    /// `apidiscovery.k8s.io/v2` aggregated discovery.
    AggregatedDiscovery,
    /// `PartialObjectMetadata` of `meta.k8s.io` in the named version (`v1`, `v1beta1`): objects
    /// reduced to their metadata (kube-rs `get_metadata`/`metadata_watcher`, client-go's
    /// metadata informers).
    Metadata(&'static str),
    /// `PartialObjectMetadataList`: a list of objects reduced to their metadata.
    MetadataList(&'static str),
}

impl Format {
    pub(crate) fn of(headers: &HeaderMap) -> Format {
        let accept: String = headers
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        // The client lists alternatives in order of preference; take the first we can serve.
        for alternative in accept.split(',') {
            let alternative = alternative.replace(' ', "");
            if alternative.contains("as=Table") && alternative.contains("g=meta.k8s.io") {
                return Format::Table;
            }
            if alternative.starts_with("application/json")
                && let Some(metadata) = Format::metadata(&alternative)
            {
                return metadata;
            }
            if alternative.contains("as=APIGroupDiscoveryList")
                && alternative.contains("g=apidiscovery.k8s.io")
                && alternative.contains("v=v2")
                && !alternative.contains("v=v2beta1")
            {
                return Format::AggregatedDiscovery;
            }
            if alternative.starts_with("application/json") || alternative.starts_with("*/*") {
                return Format::Json;
            }
        }
        Format::Json
    }

    /// A `PartialObjectMetadata[List]` alternative of the `Accept` header, if this is one.
    fn metadata(alternative: &str) -> Option<Format> {
        let parameters: Vec<&str> = alternative.split(';').skip(1).collect();
        let has = |parameter: &str| parameters.contains(&parameter);
        if !has("g=meta.k8s.io") {
            return None;
        }
        let version = if has("v=v1") {
            "v1"
        } else if has("v=v1beta1") {
            "v1beta1"
        } else {
            return None;
        };
        if has("as=PartialObjectMetadata") {
            Some(Format::Metadata(version))
        } else if has("as=PartialObjectMetadataList") {
            Some(Format::MetadataList(version))
        } else {
            None
        }
    }
}

/// Everything known about a request before its body is read.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) method: Method,
    pub(crate) route: Route,
    pub(crate) query: Query,
    pub(crate) verb: Verb,
    pub(crate) format: Format,
    pub(crate) content_type: Option<String>,
    /// Who sends the request, once authenticated (reviews report and judge it).
    pub(crate) requester: crate::semantics::authorization::Identity,
    /// The `User-Agent` header: names the manager of writes without a `fieldManager`.
    pub(crate) user_agent: Option<String>,
    /// Watch streams end after this many events (an injected fault).
    pub(crate) close_watch_after: Option<u64>,
    /// Watch streams cut the connection after this many events (an injected fault).
    pub(crate) reset_watch_after: Option<u64>,
    /// Break the stream's contract at an event (an injected, opted-in `BreakStream`).
    pub(crate) break_stream: Option<(crate::endpoints::control::Breach, u64)>,
    /// Watch streams say nothing, ever (an injected fault).
    pub(crate) silent_watch: bool,
    /// Writes answer `409 Conflict`; with `true`, after a competing write (an injected fault).
    pub(crate) conflict: Option<bool>,
    /// Lists and watches' initial objects come in the order this seeds (an injected fault).
    pub(crate) shuffle_seed: Option<u64>,
    /// Serve reads from the state this many changes ago (an injected `StaleView`).
    pub(crate) stale_by: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        group: &str,
        ns: Option<&str>,
        plural: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Object(ObjectPath {
            group: group.into(),
            version: "v1".into(),
            namespace: ns.map(String::from),
            plural: plural.into(),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        })
    }

    #[test]
    fn routes() {
        assert_eq!(Route::parse("/version"), Route::Version);
        assert_eq!(Route::parse("/api"), Route::CoreVersions);
        assert_eq!(
            Route::parse("/apis/kopf.dev"),
            Route::Group("kopf.dev".into())
        );
        assert_eq!(
            Route::parse("/api/v1"),
            Route::Resources {
                group: "".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            Route::parse("/api/v1/namespaces"),
            object("", None, "namespaces", None, None)
        );
        assert_eq!(
            Route::parse("/api/v1/namespaces/ns1"),
            object("", None, "namespaces", Some("ns1"), None)
        );
        assert_eq!(
            Route::parse("/api/v1/namespaces/ns1/status"),
            object("", None, "namespaces", Some("ns1"), Some("status"))
        );
        assert_eq!(
            Route::parse("/api/v1/namespaces/ns1/pods"),
            object("", Some("ns1"), "pods", None, None)
        );
        assert_eq!(
            Route::parse("/apis/kopf.dev/v1/namespaces/ns1/kopfexamples/x/status"),
            object(
                "kopf.dev",
                Some("ns1"),
                "kopfexamples",
                Some("x"),
                Some("status")
            )
        );
        assert_eq!(
            Route::parse("/apis/kopf.dev/v1/kopfexamples"),
            object("kopf.dev", None, "kopfexamples", None, None)
        );
        assert_eq!(Route::parse("/nonsense/path"), Route::NotFound);
        assert_eq!(Route::parse("/api/v1/a/b/c/d/e/f/g"), Route::NotFound);
    }

    #[test]
    fn flags() {
        let query = Query::parse(Some("watch=True&a=1&b=false&c=FALSE&d=0&e=&f=yes"));
        assert!(query.flag("watch") && query.flag("a") && query.flag("e") && query.flag("f"));
        assert!(!query.flag("b") && !query.flag("c") && !query.flag("d") && !query.flag("absent"));
    }

    #[test]
    fn formats() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(Format::of(&headers), Format::Table);
        headers.insert(
            http::header::ACCEPT,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(Format::of(&headers), Format::AggregatedDiscovery);
        headers.insert(http::header::ACCEPT, "application/json".parse().unwrap());
        assert_eq!(Format::of(&headers), Format::Json);
        headers.insert(
            http::header::ACCEPT,
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
                .parse()
                .unwrap(),
        );
        assert_eq!(Format::of(&headers), Format::MetadataList("v1"));
        headers.insert(
            http::header::ACCEPT,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"
                .parse()
                .unwrap(),
        );
        assert_eq!(Format::of(&headers), Format::Metadata("v1beta1"));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsing_never_panics(path in ".*") {
            let _ = Route::parse(&path);
        }

        #[test]
        fn object_paths_round_trip(
            group in "[a-z]{1,8}(\\.[a-z]{1,8}){0,2}",
            version in "v[1-9](alpha|beta)?[1-9]?",
            namespace in proptest::option::of("[a-z][a-z0-9-]{0,10}"),
            plural in "[a-z]{1,12}",
            name in proptest::option::of("[a-z0-9][a-z0-9.-]{0,20}"),
        ) {
            prop_assume!(plural != "namespaces");
            let mut path = format!("/apis/{group}/{version}");
            if let Some(ns) = &namespace {
                path.push_str(&format!("/namespaces/{ns}"));
            }
            path.push_str(&format!("/{plural}"));
            if let Some(name) = &name {
                path.push_str(&format!("/{name}"));
            }
            let expected = Route::Object(ObjectPath {
                group, version, namespace, plural, name, subresource: None,
            });
            prop_assert_eq!(Route::parse(&path), expected);
        }

        #[test]
        fn queries_never_panic(query in ".*") {
            let parsed = Query::parse(Some(&query));
            let _ = parsed.flag("watch");
            let _ = parsed.number("limit");
        }
    }
}
