//! What the attribute and the function mean for a handler kind, with every mistake gathered
//! into one combined error.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens as _;
use syn::spanned::Spanned as _;
use syn::visit_mut::VisitMut;
use syn::{Ident, LitStr};

use crate::kinds::{self, Kind};
use crate::parse::{Attribute, Item};

mod durations;
mod operations;

use durations::duration;
use operations::operations;

/// A handler ready to be expanded.
pub(crate) struct Handler {
    pub(crate) kind: Kind,
    /// The path of the `kopf` crate (`::kopf` unless `crate = ...`).
    pub(crate) krate: TokenStream,
    /// `None` for activity handlers, which serve the operator itself.
    pub(crate) resource: Option<Resource>,
    pub(crate) id: LitStr,
    /// `on_field`'s field, passed to its constructor.
    pub(crate) field: Option<LitStr>,
    /// A timer's interval, passed to its constructor.
    pub(crate) interval: Option<Duration>,
    pub(crate) options: Vec<Setter>,
    pub(crate) arguments: Vec<Argument>,
    pub(crate) output: Output,
}

/// The resource the handler serves.
pub(crate) enum Resource {
    Exact {
        group: String,
        version: String,
        plural: String,
        span: Span,
    },
    Named(String, Span),
    NamedIn(String, String, Span),
    Category(LitStr),
    /// A `Selector` constant such as `kopf::resources::EVERYTHING`.
    Constant(syn::Path),
    Typed(syn::Type),
}

/// One option, as a call on the handler's descriptor.
pub(crate) enum Setter {
    Errors(Ident),
    Timeout(Duration),
    Retries(TokenStream),
    Backoff(Duration),
    Param(TokenStream),
    Label(LitStr, MetaFilter),
    Annotation(LitStr, MetaFilter),
    When(TokenStream),
    Field(LitStr),
    Value(ValueFilter),
    Old(ValueFilter),
    New(ValueFilter),
    Optional,
    Deleted,
    InitialDelay(Duration),
    CancellationBackoff(Duration),
    CancellationTimeout(Duration),
    Idle(Duration),
    Sharp,
    LeaderOnly,
    /// `owns = [..]`: resource types the handler creates and changes, for the `rbac` output.
    Owns(Vec<syn::Type>),
    /// `reads = [..]`: resource types the handler reads.
    Reads(Vec<syn::Type>),
    /// `operations = [CREATE, UPDATE]`: the variants of `Operation`.
    Operations(Vec<Ident>),
    Subresource(LitStr),
    Persistent,
    SideEffects,
    IgnoreFailures,
}

/// A duration written as a literal (checked here) or as an expression of type `Duration`.
pub(crate) enum Duration {
    Literal { secs: u64, nanos: u32, span: Span },
    Expr(TokenStream),
}

/// A label or annotation filter.
pub(crate) enum MetaFilter {
    Value(LitStr),
    Present(Span),
    Absent(Span),
    Callable(TokenStream),
}

/// A `value`/`old`/`new` filter.
pub(crate) enum ValueFilter {
    Json(TokenStream),
    Present(Span),
    Absent(Span),
    Callable(TokenStream),
}

/// One parameter of the function: which argument it asks for and as what type.
#[derive(Clone)]
pub(crate) struct Argument {
    /// The argument's name (the marker type in `__private::args`), spanned at the parameter.
    pub(crate) name: Ident,
    /// The parameter's type with its lifetimes elided.
    pub(crate) ty: syn::Type,
    /// Written as a reference: borrowed from the invocation.
    pub(crate) borrowed: bool,
    /// Not an argument's name: the index of the `#[kopf::index]` function of that name.
    pub(crate) index: bool,
}

/// What the function returns.
#[derive(Clone)]
pub(crate) enum Output {
    /// Nothing: stores nothing.
    Unit,
    /// A value to store.
    Value(syn::Type),
    /// A `Result` whose `Ok` is stored and whose `Err` converts into `kopf::Error`.
    Result(syn::Type),
}

/// Gathers errors so that the user sees all of them at once.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn at(&mut self, span: Span, message: impl std::fmt::Display) {
        self.push(syn::Error::new(span, message));
    }

    /// How many errors were gathered so far.
    fn len(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |errors| errors.clone().into_iter().count())
    }
}

/// One handler attribute of the function: the one being expanded, or one stacked under it.
pub(crate) struct Registration {
    pub(crate) kind: Kind,
    pub(crate) args: TokenStream,
    /// Where errors about the attribute as a whole (a missing resource or field) point.
    pub(crate) site: Span,
}

/// Takes the handler attributes stacked under the one being expanded off the function, in the
/// order written: the expanded attribute registers them all, as Kopf's stacked decorators do.
pub(crate) fn take_stacked(function: &mut syn::ItemFn) -> syn::Result<Vec<Registration>> {
    let mut stacked = Vec::new();
    let mut errors = Errors::default();
    function.attrs.retain(|attribute| {
        let Some(kind) = attribute
            .path()
            .segments
            .last()
            .and_then(|segment| Kind::from_attribute(&segment.ident.to_string()))
        else {
            return true;
        };
        let args = match &attribute.meta {
            syn::Meta::Path(_) => TokenStream::new(),
            syn::Meta::List(list) => list.tokens.clone(),
            syn::Meta::NameValue(_) => {
                errors.at(
                    name_span(attribute),
                    format!("expected `#[kopf::{}(...)]`", kind.attribute()),
                );
                return false;
            }
        };
        stacked.push(Registration {
            kind,
            args,
            site: name_span(attribute),
        });
        false
    });
    match errors.0 {
        Some(errors) => Err(errors),
        None => Ok(stacked),
    }
}

/// Where an attribute's name is (`on_field` of `#[kopf::on_field(..)]`): errors about a stacked
/// attribute as a whole point there.
fn name_span(attribute: &syn::Attribute) -> Span {
    attribute
        .path()
        .segments
        .last()
        .map_or_else(|| attribute.span(), |segment| segment.ident.span())
}

/// Checks the attributes of one function (the expanded one first, then those stacked under it,
/// in the order written) against their kinds and the function: the handlers in Kopf's order of
/// registration, which is the reverse (Python applies the decorator nearest the function
/// first), or every mistake at once.
pub(crate) fn handlers(
    registrations: Vec<Registration>,
    function: &syn::ItemFn,
) -> syn::Result<Vec<Handler>> {
    let mut errors = Errors::default();
    let kinds: Vec<Kind> = registrations.iter().map(|r| r.kind).collect();
    let arguments = signature(&kinds, &function.sig, &mut errors);
    let output = output(&function.sig.output);
    let mut checked: Vec<Kind> = Vec::new();
    for &kind in &kinds {
        if !checked.contains(&kind) {
            checked.push(kind);
            check_output(kind, &output, function, &mut errors);
        }
    }
    let mut handlers = Vec::new();
    for registration in registrations {
        let parsed = crate::parse::attribute(registration.args);
        let handler = match parsed {
            Ok(attribute) => options(
                registration.kind,
                attribute,
                registration.site,
                function,
                arguments.clone(),
                output.clone(),
                &mut errors,
            ),
            Err(error) => {
                errors.push(error);
                None
            }
        };
        handlers.extend(handler);
    }
    let mut indexes = handlers.iter().filter(|h| h.kind == Kind::Index);
    if let Some(first) = indexes.next() {
        for other in indexes.filter(|h| h.id.value() != first.id.value()) {
            errors.at(
                other.id.span(),
                format!(
                    "stacked `index` attributes fill one index, which handlers take under the function's name: give them one id, not `{}` and `{}`",
                    first.id.value(),
                    other.id.value()
                ),
            );
        }
    }
    match errors.0 {
        Some(errors) => Err(errors),
        None if handlers.is_empty() => Err(syn::Error::new(Span::call_site(), "invalid handler")),
        None => {
            handlers.reverse();
            Ok(handlers)
        }
    }
}

/// The checks of what a function of this kind returns.
fn check_output(kind: Kind, output: &Output, function: &syn::ItemFn, errors: &mut Errors) {
    if kind == Kind::Index {
        match output {
            Output::Unit => errors.at(
                function.sig.ident.span(),
                "an index function returns the object's entries: a map (`BTreeMap<K, V>`), a `(K, V)` pair, a `Vec<(K, V)>`, or an `Option` of one",
            ),
            Output::Value(ty) | Output::Result(ty) if contains_impl_trait(ty) => errors.at(
                ty.span(),
                "an index function's return type is written out (its key and value types name the index's type), not `impl Trait`",
            ),
            _ => {}
        }
    }
    if kind == Kind::Login && matches!(output, Output::Unit) {
        errors.at(
            function.sig.ident.span(),
            "a login handler returns the credentials: `kopf::login::ConnectionInfo` or `kube::Config`, an `Option` of either, or a `kopf::Result` of those",
        );
    }
}

fn options(
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
        for (filter, span) in needs_field {
            errors.at(
                span,
                format!("`{filter}` filters a field's value: it needs `field = \"...\"`"),
            );
        }
    }
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

/// The function's parameters as arguments, and the checks of its signature. With stacked
/// attributes, each parameter must be an argument of every kind.
fn signature(kinds: &[Kind], sig: &syn::Signature, errors: &mut Errors) -> Vec<Argument> {
    if let Some(constness) = &sig.constness {
        errors.at(constness.span, "a handler cannot be a `const fn`");
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.at(unsafety.span, "a handler cannot be an `unsafe fn`");
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi.span(), "a handler cannot have an `extern` ABI");
    }
    if let Some(variadic) = &sig.variadic {
        errors.at(variadic.span(), "a handler cannot be variadic");
    }
    for param in &sig.generics.params {
        if !matches!(param, syn::GenericParam::Lifetime(_)) {
            errors.at(
                param.span(),
                "a handler cannot be generic: its arguments are converted to the types written",
            );
        }
    }
    let stack = Stack::of(kinds);
    let valid = stack.arguments().join(", ");
    let attrs = stack.attributes();
    let mut arguments = Vec::new();
    for input in &sig.inputs {
        let typed = match input {
            syn::FnArg::Receiver(receiver) => {
                errors.at(
                    receiver.span(),
                    "a handler is a free function, not a method",
                );
                continue;
            }
            syn::FnArg::Typed(typed) => typed,
        };
        let ident = match &*typed.pat {
            syn::Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => &pat.ident,
            other => {
                errors.at(
                    other.span(),
                    format!("handler arguments are given by name: write one of {valid}"),
                );
                continue;
            }
        };
        let written = ident.to_string();
        let written = written.strip_prefix("r#").unwrap_or(&written);
        // `_spec` asks for `spec` without an unused-variable warning.
        let name = match written.strip_prefix('_') {
            Some(rest) if !rest.is_empty() => rest,
            _ => written,
        };
        // Any other name takes the index of the `#[kopf::index]` function of that name, when
        // its type says so (`Index<K, V>`); a misspelt index is not found in scope (rustc's
        // error, at the parameter). A name of no argument with another type is a mistake.
        let index = !kinds::is_argument(name);
        if index && !names_an_index(&typed.ty) {
            errors.at(
                ident.span(),
                format!(
                    "`{name}` is neither an argument of {attrs} handlers nor an index{}: an \
                     index is taken as `&kopf::Index<K, V>` or `kopf::Index<K, V>` under the \
                     name of its `#[kopf::index]` function; {attrs} handlers get: {valid}",
                    suggestion(name, &stack.arguments())
                ),
            );
            continue;
        }
        if !index && let Some(message) = stack.refusal(name) {
            errors.at(ident.span(), message);
            continue;
        }
        let mut ty = (*typed.ty).clone();
        if contains_impl_trait(&ty) {
            errors.at(
                typed.ty.span(),
                "argument types are concrete types: `impl Trait` cannot be converted to",
            );
            continue;
        }
        if name == "settings"
            && let syn::Type::Reference(reference) = &ty
            && let Some(mutability) = reference.mutability
            && let Some(kind) = kinds.iter().find(|kind| **kind != Kind::Startup)
        {
            errors.at(
                mutability.span,
                format!(
                    "only `on_startup` handlers change the operator's settings; `{}` handlers \
                     read them: take `&kopf::Settings` or `kopf::Settings`",
                    kind.attribute()
                ),
            );
            continue;
        }
        let borrowed = contains_borrow(ty.to_token_stream());
        ElideLifetimes.visit_type_mut(&mut ty);
        arguments.push(Argument {
            name: Ident::new(kinds::marker(name), ident.span()),
            ty,
            borrowed,
            index,
        });
    }
    arguments
}

/// The kinds of one function's attributes (one, or several stacked), for the checks and the
/// messages about its parameters.
struct Stack {
    kinds: Vec<Kind>,
}

impl Stack {
    /// The distinct kinds, in the order written.
    fn of(kinds: &[Kind]) -> Stack {
        let mut distinct: Vec<Kind> = Vec::new();
        for kind in kinds {
            if !distinct.contains(kind) {
                distinct.push(*kind);
            }
        }
        Stack { kinds: distinct }
    }

    /// `` `on_create` `` or `` `on_create` and `on_update` ``.
    fn attributes(&self) -> String {
        list(
            self.kinds
                .iter()
                .map(|kind| format!("`{}`", kind.attribute())),
        )
    }

    /// The arguments that every kind gets.
    fn arguments(&self) -> Vec<&'static str> {
        let (first, rest) = self
            .kinds
            .split_first()
            .expect("a handler has an attribute");
        first
            .arguments()
            .iter()
            .copied()
            .filter(|name| rest.iter().all(|kind| kind.arguments().contains(name)))
            .collect()
    }

    /// Why an argument of some kind cannot be asked for here, naming the kinds that refuse it;
    /// `None` when every kind gives it.
    fn refusal(&self, name: &str) -> Option<String> {
        let refusing: Vec<Kind> = self
            .kinds
            .iter()
            .copied()
            .filter(|kind| !kind.arguments().contains(&name))
            .collect();
        let first = *refusing.first()?;
        let them = list(
            refusing
                .iter()
                .map(|kind| format!("`{}`", kind.attribute())),
        );
        let reason = kinds::not_given(first, name)
            .map(|reason| format!(" ({reason})"))
            .unwrap_or_default();
        let valid = self.arguments().join(", ");
        Some(if self.kinds.len() == 1 {
            format!(
                "`{name}` is not given to {them} handlers{reason}; {them} handlers get: {valid}"
            )
        } else {
            format!(
                "`{name}` is not given to {them} handlers{reason}; a function with stacked \
                 attributes is called as each of them, so it takes only what all of {} get: {valid}",
                self.attributes()
            )
        })
    }
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn output(output: &syn::ReturnType) -> Output {
    match output {
        syn::ReturnType::Default => Output::Unit,
        syn::ReturnType::Type(_, ty) => {
            let is_result = match &**ty {
                syn::Type::Path(path) => path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident == "Result"),
                _ => false,
            };
            if is_result {
                Output::Result((**ty).clone())
            } else {
                Output::Value((**ty).clone())
            }
        }
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

/// Whether a parameter's type is written as an index: `Index<K, V>` or a reference to one,
/// by any path (`kopf::Index<..>`).
fn names_an_index(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Reference(reference) => names_an_index(&reference.elem),
        syn::Type::Paren(inner) => names_an_index(&inner.elem),
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Index"),
        _ => false,
    }
}

/// `" (did you mean `timeout`?)"` for a close misspelling of a valid name, or nothing.
fn suggestion(written: &str, valid: &[&str]) -> String {
    valid
        .iter()
        .map(|candidate| (distance(written, candidate), candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| format!(" (did you mean `{candidate}`?)"))
        .unwrap_or_default()
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

/// Whether a type is written as a borrow: a `&` or a lifetime anywhere in it.
fn contains_borrow(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Punct(punct) => punct.as_char() == '&' || punct.as_char() == '\'',
        TokenTree::Group(group) => contains_borrow(group.stream()),
        _ => false,
    })
}

fn contains_impl_trait(ty: &syn::Type) -> bool {
    ty.to_token_stream()
        .into_iter()
        .any(|token| matches!(&token, TokenTree::Ident(ident) if ident == "impl"))
}

/// Replaces named lifetimes with `'_`: the conversion is written inside the wrapper, where
/// the function's lifetime parameters do not exist.
struct ElideLifetimes;

impl VisitMut for ElideLifetimes {
    fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
        if lifetime.ident != "static" {
            lifetime.ident = Ident::new("_", lifetime.ident.span());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(
            suggestion("timout", &["id", "timeout"]),
            " (did you mean `timeout`?)"
        );
        assert_eq!(
            suggestion("nmae", &["name", "namespace"]),
            " (did you mean `name`?)"
        );
        assert_eq!(suggestion("whatever", &["name"]), "");
    }
}
