//! What the attribute and the function mean for a handler kind, with every mistake gathered
//! into one combined error: the attribute's options are checked in `options`, the function's
//! parameters and return type in `signature`, and both against each other here.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned as _;
use syn::{Ident, LitStr};

use crate::kinds::Kind;

mod durations;
mod operations;
mod options;
mod signature;

use options::options;
use signature::{contains_impl_trait, output, signature};

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
    /// `operation = CREATE`: Kopf's deprecated singular, added to the operations; spanned at
    /// the option, where its deprecation is reported.
    Operation(Ident, Span),
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
