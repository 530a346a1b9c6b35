//! The handler function's signature: which argument each parameter asks for and as what
//! type, what it returns, and the checks of both against the handler's kind (or every kind
//! of stacked attributes).

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens as _;
use syn::Ident;
use syn::spanned::Spanned as _;
use syn::visit_mut::VisitMut;

use super::{Argument, Errors, Output, suggestion};
use crate::kinds::{self, Kind};

/// The function's parameters as arguments, and the checks of its signature. With stacked
/// attributes, each parameter must be an argument of every kind.
pub(super) fn signature(
    kinds: &[Kind],
    sig: &syn::Signature,
    errors: &mut Errors,
) -> Vec<Argument> {
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
        if names_live(&typed.ty) && !live_view(kinds, name, &typed.ty, errors) {
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

pub(super) fn output(output: &syn::ReturnType) -> Output {
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

/// Whether a parameter's type is written as a live view: `Live<T>` (or a reference to one),
/// by any path (`kopf::Live<..>`).
fn names_live(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Reference(reference) => names_live(&reference.elem),
        syn::Type::Paren(inner) => names_live(&inner.elem),
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Live"),
        _ => false,
    }
}

/// Checks a parameter written as a live view: only daemons and timers get one, of a JSON part
/// of the object, by value. `false` (with the error) when it is not such.
fn live_view(kinds: &[Kind], name: &str, ty: &syn::Type, errors: &mut Errors) -> bool {
    const PARTS: &[&str] = &["body", "spec", "meta", "status", "labels", "annotations"];
    // Stacked, every attribute must give one.
    let other = kinds
        .iter()
        .find(|kind| !matches!(kind, Kind::Daemon | Kind::Timer));
    let message = if !PARTS.contains(&name) {
        format!(
            "a live view (`kopf::Live<T>`) is given as one of {}, not as `{name}`",
            PARTS.join(", ")
        )
    } else if let Some(kind) = other {
        let attr = kind.attribute();
        format!(
            "`{name}: kopf::Live<..>` is a live view, given only to daemons and timers (`daemon`, \
             `timer`), which run while the object changes; `{attr}` handlers are called for one \
             state of the object: take that state as `{name}: &serde_json::Value` or \
             `{name}: MyType`"
        )
    } else if matches!(ty, syn::Type::Reference(_)) {
        format!("take the live view by value: `{name}: kopf::Live<..>` (a handle, cheap to clone)")
    } else {
        return true;
    };
    errors.at(ty.span(), message);
    false
}

/// Whether a type is written as a borrow: a `&` or a lifetime anywhere in it.
fn contains_borrow(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Punct(punct) => punct.as_char() == '&' || punct.as_char() == '\'',
        TokenTree::Group(group) => contains_borrow(group.stream()),
        _ => false,
    })
}

pub(super) fn contains_impl_trait(ty: &syn::Type) -> bool {
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
