//! A handler attribute's options (`id`, `timeout`, `labels`, `when`, the resource...), each
//! checked against the handler's kind and turned into a call on its descriptor, with every
//! mistake gathered.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens as _;
use syn::spanned::Spanned as _;
use syn::{Ident, LitStr};

use super::durations::duration;
use super::operations::{operation, operations};
use super::{
    Argument, Duration, Errors, Handler, MetaFilter, Output, Resource, Setter, ValueFilter,
    suggestion,
};
use crate::kinds::{self, Kind};
use crate::parse::{Attribute, Item};

pub(super) fn options(
    kind: Kind,
    attribute: Attribute,
    site: Span,
    function: &syn::ItemFn,
    arguments: Vec<Argument>,
    output: Output,
    errors: &mut Errors,
) -> Option<Handler> {
    let attr = kind.attribute();
    let before = errors.len();
    let mut strings: Vec<LitStr> = Vec::new();
    let mut typed: Option<syn::Type> = None;
    let mut krate: Option<TokenStream> = None;
    let mut id: Option<LitStr> = None;
    let mut field: Option<LitStr> = None;
    let mut interval: Option<Duration> = None;
    let mut category: Option<LitStr> = None;
    let mut setters: Vec<Setter> = Vec::new();
    let mut needs_field: Vec<(String, Span)> = Vec::new();
    // Added after `operations`, which sets them all.
    let mut singular_operation: Option<Setter> = None;
    let mut seen: Vec<String> = Vec::new();

    for item in attribute.items {
        let (key, span) = match &item {
            Item::Str(literal) => {
                if typed.is_some() {
                    errors.at(
                        literal.span(),
                        "the resource is either strings or a type, not both",
                    );
                } else if seen.is_empty() {
                    strings.push(literal.clone());
                } else {
                    errors.at(
                        literal.span(),
                        "the resource comes first, before the options",
                    );
                }
                continue;
            }
            Item::Type(ty) => match flag_name(ty) {
                Some(flag) => (flag, ty.span()),
                None if seen.is_empty() && strings.is_empty() && typed.is_none() => {
                    typed = Some(ty.clone());
                    continue;
                }
                None => {
                    errors.at(
                        ty.span(),
                        "expected an option (`key = value`); the resource is given once, first",
                    );
                    continue;
                }
            },
            Item::Value { key, .. } | Item::List { key, .. } => (key.to_string(), key.span()),
        };
        if !kinds::ALL_OPTIONS.contains(&key.as_str()) {
            errors.at(
                span,
                format!(
                    "unknown option `{key}` of `{attr}`{}; its options are: {}",
                    suggestion(&key, &kind.options()),
                    kind.options().join(", ")
                ),
            );
            continue;
        }
        if !kind.accepts(&key) {
            errors.at(
                span,
                format!(
                    "`{key}` is not an option of `{attr}`{}; its options are: {}",
                    kinds::option_elsewhere(kind, &key),
                    kind.options().join(", ")
                ),
            );
            continue;
        }
        if seen.contains(&key) {
            errors.at(span, format!("`{key}` is given twice"));
            continue;
        }
        seen.push(key.clone());
        match (key.as_str(), item) {
            ("labels" | "annotations", Item::List { entries, .. }) => {
                for entry in entries {
                    let filter = meta_filter(entry.value);
                    setters.push(if key == "labels" {
                        Setter::Label(entry.key, filter)
                    } else {
                        Setter::Annotation(entry.key, filter)
                    });
                }
            }
            ("labels" | "annotations", _) => errors.at(
                span,
                format!(
                    "expected `{key}(\"key\" = \"value\", \"other\" = present, \"old\" = absent)`"
                ),
            ),
            (
                flag @ ("optional" | "deleted" | "sharp" | "leader_only" | "persistent"
                | "side_effects" | "ignore_failures"),
                item,
            ) => {
                let on = match item {
                    Item::Type(_) => true,
                    Item::Value { value, .. } => match syn::parse2::<syn::LitBool>(value) {
                        Ok(literal) => literal.value,
                        Err(_) => {
                            errors.at(span, format!("expected `{flag}` or `{flag} = true`"));
                            false
                        }
                    },
                    _ => {
                        errors.at(span, format!("expected `{flag}` or `{flag} = true`"));
                        false
                    }
                };
                if on {
                    setters.push(match flag {
                        "optional" => Setter::Optional,
                        "deleted" => Setter::Deleted,
                        "leader_only" => Setter::LeaderOnly,
                        "persistent" => Setter::Persistent,
                        "side_effects" => Setter::SideEffects,
                        "ignore_failures" => Setter::IgnoreFailures,
                        _ => Setter::Sharp,
                    });
                }
            }
            (_, Item::Value { value, .. }) => match key.as_str() {
                "crate" => match syn::parse2::<syn::Path>(value) {
                    Ok(path) => krate = Some(path.into_token_stream()),
                    Err(error) => errors.push(syn::Error::new(
                        error.span(),
                        "expected the path of the kopf crate: `crate = ::my_kopf`",
                    )),
                },
                "id" => match string(value, "an id: `id = \"create_fn\"`", errors) {
                    Some(literal) if literal.value().is_empty() => {
                        errors.at(literal.span(), "the id cannot be empty")
                    }
                    Some(literal) => id = Some(literal),
                    None => {}
                },
                "category" => {
                    if let Some(literal) = string(value, "a category: `category = \"all\"`", errors)
                    {
                        category = Some(literal);
                    }
                }
                "field" => {
                    match string(value, "a dotted field: `field = \"spec.replicas\"`", errors) {
                        Some(literal) if literal.value().trim_matches('.').is_empty() => {
                            errors.at(literal.span(), "the field cannot be empty")
                        }
                        Some(literal) => field = Some(literal),
                        None => {}
                    }
                }
                "errors" => {
                    if let Some(mode) = errors_mode(value, errors) {
                        setters.push(Setter::Errors(mode));
                    }
                }
                "timeout" => {
                    if let Some(duration) = duration(value, errors) {
                        setters.push(Setter::Timeout(duration));
                    }
                }
                "backoff" => {
                    if let Some(duration) = duration(value, errors) {
                        setters.push(Setter::Backoff(duration));
                    }
                }
                "interval" => interval = duration(value, errors),
                delay @ ("initial_delay"
                | "cancellation_backoff"
                | "cancellation_timeout"
                | "idle") => {
                    if let Some(duration) = duration(value, errors) {
                        setters.push(match delay {
                            "initial_delay" => Setter::InitialDelay(duration),
                            "cancellation_backoff" => Setter::CancellationBackoff(duration),
                            "cancellation_timeout" => Setter::CancellationTimeout(duration),
                            _ => Setter::Idle(duration),
                        });
                    }
                }
                "retries" => {
                    if let Some(retries) = retries(value, errors) {
                        setters.push(Setter::Retries(retries));
                    }
                }
                "param" => setters.push(Setter::Param(value)),
                "owns" | "reads" => {
                    if let Some(types) = resource_types(&key, value, errors) {
                        setters.push(if key == "owns" {
                            Setter::Owns(types)
                        } else {
                            Setter::Reads(types)
                        });
                    }
                }
                "when" => setters.push(Setter::When(value)),
                "operations" => {
                    if let Some(operations) = operations(value, errors) {
                        setters.push(Setter::Operations(operations));
                    }
                }
                "operation" => {
                    if let Some(variant) = operation(value, errors) {
                        singular_operation = Some(Setter::Operation(variant, span));
                    }
                }
                "subresource" => match string(
                    value,
                    "a subresource: `subresource = \"status\"`, or `\"*\"` for the object and all its subresources",
                    errors,
                ) {
                    Some(literal) if literal.value().is_empty() => errors.at(
                        literal.span(),
                        "the subresource cannot be empty: leave it out for the main object only",
                    ),
                    Some(literal) => setters.push(Setter::Subresource(literal)),
                    None => {}
                },
                filter @ ("value" | "old" | "new") => {
                    needs_field.push((filter.to_string(), span));
                    let parsed = value_filter(value);
                    setters.push(match filter {
                        "value" => Setter::Value(parsed),
                        "old" => Setter::Old(parsed),
                        _ => Setter::New(parsed),
                    });
                }
                _ => errors.at(span, format!("expected `{key}` without a value")),
            },
            (_, Item::List { span: list, .. }) => {
                errors.at(list, format!("expected `{key} = ...`"));
            }
            (_, _) => errors.at(span, format!("expected `{key} = ...`")),
        }
    }

    if kind == Kind::Field && field.is_none() && errors.len() == before {
        errors.at(
            site,
            "`on_field` needs the field whose changes it handles: `field = \"spec.replicas\"`",
        );
    }
    if kind == Kind::Timer && interval.is_none() && errors.len() == before {
        errors.at(
            site,
            "a `timer` needs its interval: `interval = \"10s\"` (or a number of seconds)",
        );
    }
    if field.is_none() {
        for (filter, span) in &needs_field {
            errors.at(
                *span,
                format!("`{filter}` filters a field's value: it needs `field = \"...\"`"),
            );
        }
    }
    if let Some((_, value)) = needs_field.iter().find(|(filter, _)| filter == "value")
        && needs_field.iter().any(|(filter, _)| filter != "value")
    {
        errors.at(
            *value,
            "either `value` or `old`/`new` filter a field, not both (as in Kopf): `value` matches the old or the new value",
        );
    }
    setters.extend(singular_operation);
    let resource = if !kind.serves_resource() {
        let given = strings
            .first()
            .map(LitStr::span)
            .or(typed.as_ref().map(|t| t.span()));
        if let Some(span) = given {
            errors.at(
                span,
                format!(
                    "`{attr}` handlers serve the operator itself, not a resource: the attribute takes only options ({})",
                    kind.options().join(", ")
                ),
            );
        }
        None
    } else {
        Some(resource(strings, typed, category, site, errors)?)
    };
    let id = id.unwrap_or_else(|| {
        let name = function.sig.ident.to_string();
        LitStr::new(
            name.strip_prefix("r#").unwrap_or(&name),
            function.sig.ident.span(),
        )
    });
    let field = match (kind, field) {
        (Kind::Field, field) => field,
        (_, Some(field)) => {
            setters.push(Setter::Field(field));
            None
        }
        (_, None) => None,
    };
    Some(Handler {
        kind,
        krate: krate.unwrap_or_else(|| quote::quote!(::kopf)),
        resource,
        id,
        field,
        interval,
        options: setters,
        arguments,
        output,
    })
}

/// A bare `optional`/`deleted` written where a type could be.
fn flag_name(ty: &syn::Type) -> Option<String> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let ident = path.path.get_ident()?.to_string();
    kinds::FLAGS.contains(&ident.as_str()).then_some(ident)
}

fn resource(
    strings: Vec<LitStr>,
    typed: Option<syn::Type>,
    category: Option<LitStr>,
    site: Span,
    errors: &mut Errors,
) -> Option<Resource> {
    if let Some(category) = category {
        if let Some(extra) = strings.first() {
            errors.at(
                extra.span(),
                "the resource is either named or a `category`, not both",
            );
        } else if let Some(ty) = typed {
            errors.at(
                ty.span(),
                "the resource is either a type or a `category`, not both",
            );
        }
        return Some(Resource::Category(category));
    }
    if let Some(ty) = typed {
        if let syn::Type::Path(path) = &ty
            && path.qself.is_none()
            && path
                .path
                .segments
                .last()
                .is_some_and(|s| s.ident == "EVERYTHING")
        {
            return Some(Resource::Constant(path.path.clone()));
        }
        return Some(Resource::Typed(ty));
    }
    let values: Vec<String> = strings.iter().map(LitStr::value).collect();
    let span = strings.first().map_or(site, LitStr::span);
    if let Some(empty) = strings.iter().find(|s| s.value().is_empty()) {
        errors.at(empty.span(), "a resource name cannot be empty (the core group is written by omitting it: `(\"v1\", \"pods\")`)");
        return None;
    }
    match values.as_slice() {
        [] => {
            errors.at(
                site,
                "a handler needs a resource: `(\"kopf.dev\", \"v1\", \"kopfexamples\")`, `(\"kopf.dev/v1\", \"kopfexamples\")`, `(\"kopfexamples\")`, a `kube::Resource` type, `kopf::resources::EVERYTHING` or `category = \"all\"`",
            );
            None
        }
        [name] => Some(Resource::Named(name.clone(), span)),
        [group_version, name] => Some(Resource::NamedIn(group_version.clone(), name.clone(), span)),
        [group, version, plural] => Some(Resource::Exact {
            group: group.clone(),
            version: version.clone(),
            plural: plural.clone(),
            span,
        }),
        [_, _, _, extra, ..] => {
            errors.at(
                strings[3].span(),
                format!("unexpected `\"{extra}\"`: a resource is at most a group, a version and a plural"),
            );
            None
        }
    }
}

fn string(value: TokenStream, expected: &str, errors: &mut Errors) -> Option<LitStr> {
    match syn::parse2::<LitStr>(value.clone()) {
        Ok(literal) => Some(literal),
        Err(_) => {
            errors.push(syn::Error::new_spanned(
                value,
                format!("expected {expected}"),
            ));
            None
        }
    }
}

fn errors_mode(value: TokenStream, errors: &mut Errors) -> Option<Ident> {
    let (text, span) = match syn::parse2::<syn::Expr>(value.clone()) {
        Ok(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(literal),
            ..
        })) => (literal.value(), literal.span()),
        Ok(syn::Expr::Path(path)) if path.path.get_ident().is_some() => {
            (path.path.segments[0].ident.to_string(), path.span())
        }
        _ => (String::new(), value.span()),
    };
    let variant = match text.as_str() {
        "temporary" => "Temporary",
        "permanent" => "Permanent",
        "ignored" => "Ignored",
        _ => {
            errors.at(
                span,
                "expected `errors = \"temporary\"`, `\"permanent\"` or `\"ignored\"`",
            );
            return None;
        }
    };
    Some(Ident::new(variant, span))
}

fn retries(value: TokenStream, errors: &mut Errors) -> Option<TokenStream> {
    match syn::parse2::<syn::Expr>(value.clone()) {
        Ok(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(literal),
            ..
        })) => match literal.base10_parse::<u32>() {
            Ok(n) => Some(syn::LitInt::new(&n.to_string(), literal.span()).into_token_stream()),
            Err(_) => {
                errors.at(
                    literal.span(),
                    "expected a number of attempts from 0 to 4294967295",
                );
                None
            }
        },
        Ok(syn::Expr::Lit(other)) => {
            errors.at(other.span(), "expected a number of attempts: `retries = 3`");
            None
        }
        _ => Some(value),
    }
}

fn single_ident(value: &TokenStream) -> Option<Ident> {
    let mut tokens = value.clone().into_iter();
    match (tokens.next(), tokens.next()) {
        (Some(TokenTree::Ident(ident)), None) => Some(ident),
        _ => None,
    }
}

fn meta_filter(value: TokenStream) -> MetaFilter {
    if let Ok(literal) = syn::parse2::<LitStr>(value.clone()) {
        return MetaFilter::Value(literal);
    }
    match single_ident(&value) {
        Some(ident) if ident == "present" => MetaFilter::Present(ident.span()),
        Some(ident) if ident == "absent" => MetaFilter::Absent(ident.span()),
        _ => MetaFilter::Callable(value),
    }
}

fn value_filter(value: TokenStream) -> ValueFilter {
    if let Some(ident) = single_ident(&value) {
        match ident.to_string().as_str() {
            "present" => return ValueFilter::Present(ident.span()),
            "absent" => return ValueFilter::Absent(ident.span()),
            "null" | "true" | "false" => return ValueFilter::Json(value),
            _ => {}
        }
    }
    let json = match value.clone().into_iter().next() {
        Some(TokenTree::Literal(_)) => true,
        Some(TokenTree::Punct(punct)) => punct.as_char() == '-',
        Some(TokenTree::Group(group)) => {
            matches!(group.delimiter(), Delimiter::Brace | Delimiter::Bracket)
        }
        _ => false,
    };
    if json {
        ValueFilter::Json(value)
    } else {
        ValueFilter::Callable(value)
    }
}

/// `[Deployment, ConfigMap]` or one type: the resource types of `owns` and `reads`.
fn resource_types(key: &str, value: TokenStream, errors: &mut Errors) -> Option<Vec<syn::Type>> {
    use syn::parse::Parser as _;
    let span = value.span();
    let list = |input: syn::parse::ParseStream<'_>| {
        let content;
        syn::bracketed!(content in input);
        syn::punctuated::Punctuated::<syn::Type, syn::Token![,]>::parse_terminated(&content)
    };
    if let Ok(types) = list.parse2(value.clone()) {
        return Some(types.into_iter().collect());
    }
    match syn::parse2::<syn::Type>(value) {
        Ok(ty) => Some(vec![ty]),
        Err(_) => {
            errors.at(
                span,
                format!(
                    "expected resource types: `{key} = [Deployment, ConfigMap]` (any \
                     `kube::Resource` types); for anything else, `Registry::rbac_rule`"
                ),
            );
            None
        }
    }
}
