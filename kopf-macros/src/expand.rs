//! The generated code: the function as written, a type of the same name describing the
//! handler, and its automatic registration.
//!
//! ```text
//! #[kopf::on_create("kopf.dev", "v1", "kopfexamples", timeout = "10s")]
//! async fn create_fn(spec: &Value, name: String) -> kopf::Result<Value> { .. }
//! ```
//!
//! becomes
//!
//! ```text
//! async fn create_fn(spec: &Value, name: String) -> kopf::Result<Value> { .. }
//!
//! #[doc(hidden)]
//! struct create_fn {}                       // types and functions have separate namespaces
//!
//! impl ::kopf::__private::Descriptor for create_fn {
//!     fn handlers() -> Vec<::kopf::__private::AnyHandler> {
//!         vec![AnyHandler::from(
//!             ChangeHandler::on_create(Selector::new("kopf.dev", "v1", "kopfexamples"), "create_fn",
//!                 |invocation| Box::pin(async move {
//!                     let mut slot = PatchSlot::new(&invocation);   // `patch: &mut Patch`
//!                     let mut scope = slot.scope();
//!                     let arg0 = <&Value as BorrowedArgument<'_, args::spec>>::borrow(&mut scope)?;
//!                     let arg1 = <String as OwnedArgument<args::name>>::extract(&invocation)?;
//!                     result_output(create_fn(arg0, arg1).await)
//!                 }))
//!             .timeout(Duration::new(10, 0))
//!             .origin(concat!(module_path!(), "::", "create_fn")),
//!         )]
//!     }
//! }
//!
//! inventory::submit! { Collected::new(<create_fn as Descriptor>::handlers, module_path!(), line!()) }
//! ```
//!
//! Handler attributes stacked on one function (`#[kopf::on_resume] #[kopf::on_create]`) are
//! all expanded by the first: one descriptor lists one handler per attribute, each with its own
//! wrapper (kinds differ in what their functions get), and all with the function's `origin`.
//!
//! Every path goes through `::kopf::__private` (or the `crate = ...` override). Conversions are
//! spanned at the parameter's type, so a type that does not convert is reported there.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned as _;

use crate::kinds::Kind;
use crate::validate::{
    Argument, Duration, Handler, MetaFilter, Output, Resource, Setter, ValueFilter,
};

/// The function, plus its descriptor when the handlers are valid, or plus the errors.
pub(crate) fn handlers(
    handlers: syn::Result<Vec<Handler>>,
    krate: Option<TokenStream>,
    mut function: syn::ItemFn,
) -> TokenStream {
    // Handlers ask for arguments by name, so many parameters are the normal case.
    function.attrs.push(syn::parse_quote!(#[allow(
        clippy::too_many_arguments,
        reason = "handler arguments are asked for by name"
    )]));
    let krate = krate.unwrap_or_else(|| quote!(::kopf));
    match handlers {
        Ok(handlers) => {
            let descriptor = descriptor(&handlers, &krate, &function);
            quote! {
                #function
                #descriptor
            }
        }
        Err(errors) => {
            let errors = errors.to_compile_error();
            // A method sits in an `impl`, where the descriptor type cannot go.
            let placeholder = if function.sig.receiver().is_some() {
                TokenStream::new()
            } else {
                placeholder(&function, &krate)
            };
            quote! {
                #function
                #placeholder
                #errors
            }
        }
    }
}

/// The descriptor type of the function's name: the handlers of its attributes (one, or one
/// per stacked attribute, in Kopf's order of registration), registered automatically.
fn descriptor(handlers: &[Handler], krate: &TokenStream, function: &syn::ItemFn) -> TokenStream {
    let p = quote!(#krate::__private);
    let vis = &function.vis;
    let name = &function.sig.ident;
    let constructed = handlers
        .iter()
        .map(|handler| constructor(handler, function));
    // One index, even when stacked on several resources (the ids are checked to be one).
    let index = handlers
        .iter()
        .find(|handler| handler.kind == Kind::Index)
        .map(|handler| index_descriptor(handler, name, &p));
    quote! {
        #[doc(hidden)]
        #[allow(
            non_camel_case_types,
            dead_code,
            unreachable_pub,
            missing_docs,
            reason = "the descriptor of the handler function of the same name"
        )]
        #vis struct #name {}

        impl #p::Descriptor for #name {
            fn handlers() -> #p::Vec<#p::AnyHandler> {
                #p::vec![#(#p::AnyHandler::from(#constructed)),*]
            }
        }

        #index

        #p::inventory::submit! {
            #p::Collected::new(
                <#name as #p::Descriptor>::handlers,
                #p::module_path!(),
                #p::line!(),
            )
        }
    }
}

/// One handler's declaration: its kind's constructor and its options.
fn constructor(handler: &Handler, function: &syn::ItemFn) -> TokenStream {
    let krate = &handler.krate;
    let p = quote!(#krate::__private);
    let name = &function.sig.ident;
    let selector = handler
        .resource
        .as_ref()
        .map(|resource| selector(resource, &p));
    let id = &handler.id;
    let wrapper = wrapper(handler, function, &p);
    let constructor = match handler.kind {
        Kind::Resume => quote!(#p::ChangeHandler::on_resume(#selector, #id, #wrapper)),
        Kind::Create => quote!(#p::ChangeHandler::on_create(#selector, #id, #wrapper)),
        Kind::Update => quote!(#p::ChangeHandler::on_update(#selector, #id, #wrapper)),
        Kind::Delete => quote!(#p::ChangeHandler::on_delete(#selector, #id, #wrapper)),
        Kind::Field => {
            let field = &handler.field;
            quote!(#p::ChangeHandler::on_field(#selector, #id, #field, #wrapper))
        }
        Kind::Event => quote!(#p::EventHandler::on_event(#selector, #id, #wrapper)),
        Kind::Startup => quote!(#p::ActivityHandler::on_startup(#id, #wrapper)),
        Kind::Cleanup => quote!(#p::ActivityHandler::on_cleanup(#id, #wrapper)),
        Kind::Probe => quote!(#p::ActivityHandler::on_probe(#id, #wrapper)),
        Kind::Login => quote!(#p::LoginHandler::from_fn(#id, #wrapper)),
        Kind::Index => quote! {
            #p::IndexHandler::generated::<
                <#name as #p::IndexDescriptor>::Key,
                <#name as #p::IndexDescriptor>::Value,
            >(#selector, #id, #wrapper)
        },
        Kind::Daemon => quote!(#p::DaemonHandler::new(#selector, #id, #wrapper)),
        Kind::Validate => quote!(#p::AdmissionHandler::validating(#selector, #id, #wrapper)),
        Kind::Mutate => quote!(#p::AdmissionHandler::mutating(#selector, #id, #wrapper)),
        Kind::Timer => {
            let interval = handler.interval.as_ref().map(|d| duration(d, &p));
            quote!(#p::TimerHandler::new(#selector, #id, #interval, #wrapper))
        }
    };
    let mut setters: Vec<TokenStream> = handler
        .options
        .iter()
        .map(|setter| self::setter(setter, &p))
        .collect();
    if handler.kind != Kind::Login {
        // The function behind the handler: stacked attributes register one function several
        // times, and a cause calls it once (Kopf deduplicates by function and id).
        let function = name.to_string();
        let function = function.strip_prefix("r#").unwrap_or(&function);
        setters.push(quote!(.origin(#p::concat!(#p::module_path!(), "::", #function))));
        // The `rbac` subcommand names handlers that take a client but declare nothing.
        if handler.arguments.iter().any(|a| a.name == "client") {
            setters.push(quote!(.takes_client()));
        }
    }
    quote!(#constructor #(#setters)*)
}

/// For `#[kopf::index]`: the index's key and value types, through which handlers' parameters
/// of the function's name take the index.
fn index_descriptor(handler: &Handler, name: &syn::Ident, p: &TokenStream) -> TokenStream {
    let entries = match (&handler.kind, &handler.output) {
        (Kind::Index, Output::Value(ty)) => quote_spanned!(ty.span()=> #ty),
        (Kind::Index, Output::Result(ty)) => {
            quote_spanned!(ty.span()=> <#ty as #p::IndexResult>::Entries)
        }
        _ => return TokenStream::new(),
    };
    let id = &handler.id;
    quote! {
        impl #p::IndexDescriptor for #name {
            type Key = <#entries as #p::IntoIndexEntries>::Key;
            type Value = <#entries as #p::IntoIndexEntries>::Value;
            fn id() -> &'static str {
                #id
            }
        }

        impl #p::IndexOf<
            <#entries as #p::IntoIndexEntries>::Key,
            <#entries as #p::IntoIndexEntries>::Value,
        > for #name {}
    }
}

/// A descriptor that is never called, so that `handlers![...]` naming a handler with errors
/// reports only those errors.
fn placeholder(function: &syn::ItemFn, krate: &TokenStream) -> TokenStream {
    let p = quote!(#krate::__private);
    let vis = &function.vis;
    let name = &function.sig.ident;
    quote! {
        #[doc(hidden)]
        #[allow(
            non_camel_case_types,
            dead_code,
            unreachable_pub,
            missing_docs,
            reason = "the descriptor of the handler function of the same name"
        )]
        #vis struct #name {}

        impl #p::Descriptor for #name {
            fn handlers() -> #p::Vec<#p::AnyHandler> {
                #p::unreachable!("the handler has compile errors")
            }
        }
    }
}

fn contains_impl(ty: &syn::Type) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => walk(group.stream()),
            _ => false,
        })
    }
    walk(quote!(#ty))
}

fn selector(resource: &Resource, p: &TokenStream) -> TokenStream {
    match resource {
        Resource::Exact {
            group,
            version,
            plural,
            span,
        } => quote_spanned!(*span=> #p::Selector::new(#group, #version, #plural)),
        Resource::Named(name, span) => quote_spanned!(*span=> #p::Selector::named(#name)),
        Resource::NamedIn(group_version, name, span) => {
            quote_spanned!(*span=> #p::Selector::named_in(#group_version, #name))
        }
        Resource::Category(category) => {
            quote_spanned!(category.span()=> #p::Selector::category(#category))
        }
        Resource::Constant(path) => quote!(#path),
        Resource::Typed(ty) => quote_spanned!(ty.span()=> <#ty as #p::TypedResource>::selector()),
    }
}

/// The closure the engine calls: converts the arguments, calls the function, converts its
/// result.
fn wrapper(handler: &Handler, function: &syn::ItemFn, p: &TokenStream) -> TokenStream {
    let name = &function.sig.ident;
    let invocation = format_ident!("__kopf_invocation");
    let scope = format_ident!("__kopf_scope");
    let mut bindings = Vec::new();
    let mut names = Vec::new();
    for (index, argument) in handler.arguments.iter().enumerate() {
        let local = format_ident!("__kopf_argument_{}", index);
        let conversion = if handler.kind.is_activity() {
            activity_conversion(argument, p, &invocation, &scope)
        } else {
            conversion(argument, p, &invocation, &scope)
        };
        bindings.push(quote! {
            let #local = match #conversion {
                #p::Ok(value) => value,
                #p::Err(error) => return #p::Err(error),
            };
        });
        names.push(local);
    }
    let call = match function.sig.asyncness {
        Some(_) => quote!(#name(#(#names),*).await),
        None => quote!(#name(#(#names),*)),
    };
    let result = match &handler.output {
        Output::Value(ty) if handler.kind == Kind::Index => {
            quote_spanned!(ty.span()=> #p::index_output(#invocation, #call))
        }
        Output::Result(ty) if handler.kind == Kind::Index => {
            quote_spanned!(ty.span()=> #p::index_result_output(#invocation, #call))
        }
        Output::Value(ty) | Output::Result(ty) if handler.kind == Kind::Login => {
            quote_spanned!(ty.span()=> <#ty as #p::LoginOutput>::into_login_result(#call))
        }
        Output::Unit => quote!({ #call; #p::Ok(#p::None) }),
        // `impl Trait` cannot be named in a qualified path: a function takes it.
        Output::Value(ty) if contains_impl(ty) => quote_spanned!(ty.span()=> #p::output(#call)),
        Output::Result(ty) if contains_impl(ty) => {
            quote_spanned!(ty.span()=> #p::result_output(#call))
        }
        Output::Value(ty) => {
            quote_spanned!(ty.span()=> <#ty as #p::Output>::into_handler_result(#call))
        }
        Output::Result(ty) => {
            quote_spanned!(ty.span()=> <#ty as #p::ResultOutput>::into_handler_result(#call))
        }
    };
    // Activity handlers get the operator's invocation, and settings instead of a patch.
    let (invocation_type, slot, blocking) = if handler.kind.is_activity() {
        (
            quote!(#p::ActivityInvocation),
            quote!(#p::SettingsSlot),
            quote!(#p::blocking_activity),
        )
    } else {
        (
            quote!(#p::Invocation),
            quote!(#p::PatchSlot),
            quote!(#p::blocking),
        )
    };
    let body = quote! {
        let #invocation = &#invocation;
        let mut __kopf_patch = #slot::new(#invocation);
        #[allow(unused_mut, unused_variables, reason = "not every handler borrows")]
        let mut #scope = __kopf_patch.scope();
        #(#bindings)*
        #result
    };
    // Login handlers return credentials, not a value to store.
    let (future, result, blocking) = if handler.kind == Kind::Login {
        (
            quote!(#p::LoginFuture),
            quote!(#p::LoginResult),
            quote!(#p::blocking_login),
        )
    } else {
        (
            quote!(#p::HandlerFuture),
            quote!(#p::HandlerResult),
            blocking,
        )
    };
    match function.sig.asyncness {
        Some(_) => quote! {
            |#invocation: #invocation_type| -> #future {
                #p::Box::pin(async move { #body })
            }
        },
        // A sync handler runs on the operator's own threads.
        None => quote! {
            #blocking(|#invocation: #invocation_type| -> #result { #body })
        },
    }
}

/// The conversion of one argument of an activity handler, spanned at its type.
fn activity_conversion(
    argument: &Argument,
    p: &TokenStream,
    invocation: &syn::Ident,
    scope: &syn::Ident,
) -> TokenStream {
    let ty = &argument.ty;
    let marker = &argument.name;
    let span = ty.span();
    // An index: `#marker` names the `#[kopf::index]` function's descriptor type.
    if argument.index && argument.borrowed {
        return quote_spanned!(span=> <#ty as #p::BorrowedActivityIndexArgument<'_, #marker>>::borrow(&mut #scope));
    }
    if argument.index {
        return quote_spanned!(span=> <#ty as #p::ActivityIndexArgument<#marker>>::extract(#invocation));
    }
    if argument.borrowed {
        quote_spanned!(span=> <#ty as #p::BorrowedActivityArgument<'_, #p::args::#marker>>::borrow(&mut #scope))
    } else {
        quote_spanned!(span=> <#ty as #p::OwnedActivityArgument<#p::args::#marker>>::extract(#invocation))
    }
}

/// The conversion of one argument, spanned at its type so that errors point there.
fn conversion(
    argument: &Argument,
    p: &TokenStream,
    invocation: &syn::Ident,
    scope: &syn::Ident,
) -> TokenStream {
    let ty = &argument.ty;
    let marker = &argument.name;
    let span = ty.span();
    // An index: `#marker` names the `#[kopf::index]` function's descriptor type.
    if argument.index && argument.borrowed {
        return quote_spanned!(span=> <#ty as #p::BorrowedIndexArgument<'_, #marker>>::borrow(&mut #scope));
    }
    if argument.index {
        return quote_spanned!(span=> <#ty as #p::IndexArgument<#marker>>::extract(#invocation));
    }
    if argument.borrowed && typed_json(argument) {
        return quote_spanned!(span=> <#ty as #p::BorrowedTyped<'_, #p::args::#marker>>::borrow_typed(&mut #scope));
    }
    if argument.borrowed {
        quote_spanned!(span=> <#ty as #p::BorrowedArgument<'_, #p::args::#marker>>::borrow(&mut #scope))
    } else {
        quote_spanned!(span=> <#ty as #p::OwnedArgument<#p::args::#marker>>::extract(#invocation))
    }
}

/// A JSON part of the object borrowed as a type of the user's (`body: &MyResource`,
/// `spec: &MySpec`): it is deserialized once for the call and lent. Written as `&Value` (or
/// any path ending in `Value`) it is borrowed as it is.
fn typed_json(argument: &Argument) -> bool {
    const JSON: &[&str] = &[
        "body",
        "spec",
        "meta",
        "status",
        "labels",
        "annotations",
        "event",
    ];
    let name = argument.name.to_string();
    let syn::Type::Reference(reference) = &argument.ty else {
        return false;
    };
    let as_is = match &*reference.elem {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Value"),
        _ => false,
    };
    JSON.contains(&name.as_str()) && !as_is && reference.mutability.is_none()
}

fn setter(setter: &Setter, p: &TokenStream) -> TokenStream {
    match setter {
        Setter::Errors(mode) => quote!(.errors(#p::ErrorsMode::#mode)),
        Setter::Timeout(duration) => {
            let duration = self::duration(duration, p);
            quote!(.timeout(#duration))
        }
        Setter::Backoff(duration) => {
            let duration = self::duration(duration, p);
            quote!(.backoff(#duration))
        }
        Setter::Retries(retries) => quote!(.retries(#retries)),
        Setter::Param(value) => quote!(.param(#p::serde_json::json!(#value))),
        Setter::Label(key, filter) => {
            let filter = meta_filter(filter, p);
            quote!(.label(#key, #filter))
        }
        Setter::Annotation(key, filter) => {
            let filter = meta_filter(filter, p);
            quote!(.annotation(#key, #filter))
        }
        Setter::When(predicate) => quote!(.when(#predicate)),
        Setter::Field(field) => quote!(.field(#field)),
        Setter::Value(filter) => {
            let filter = value_filter(filter, p);
            quote!(.value(#filter))
        }
        Setter::Old(filter) => {
            let filter = value_filter(filter, p);
            quote!(.old(#filter))
        }
        Setter::New(filter) => {
            let filter = value_filter(filter, p);
            quote!(.new_value(#filter))
        }
        Setter::Optional => quote!(.optional()),
        Setter::Deleted => quote!(.deleted()),
        Setter::Sharp => quote!(.sharp()),
        Setter::LeaderOnly => quote!(.leader_only()),
        Setter::Owns(types) => {
            let calls = types.iter().map(
                |ty| quote_spanned!(ty.span()=> .rbac_rule(<#ty as #p::RbacResource>::owned())),
            );
            quote!(#(#calls)*)
        }
        Setter::Reads(types) => {
            let calls = types.iter().map(
                |ty| quote_spanned!(ty.span()=> .rbac_rule(<#ty as #p::RbacResource>::read())),
            );
            quote!(#(#calls)*)
        }
        Setter::Operations(variants) => {
            let variants = variants
                .iter()
                .map(|variant| quote!(#p::Operation::#variant));
            quote!(.operations([#(#variants),*]))
        }
        Setter::Subresource(subresource) => quote!(.subresource(#subresource)),
        Setter::Persistent => quote!(.persistent()),
        Setter::SideEffects => quote!(.side_effects()),
        Setter::IgnoreFailures => quote!(.ignore_failures()),
        Setter::InitialDelay(duration) => {
            let duration = self::duration(duration, p);
            quote!(.initial_delay(#duration))
        }
        Setter::CancellationBackoff(duration) => {
            let duration = self::duration(duration, p);
            quote!(.cancellation_backoff(#duration))
        }
        Setter::CancellationTimeout(duration) => {
            let duration = self::duration(duration, p);
            quote!(.cancellation_timeout(#duration))
        }
        Setter::Idle(duration) => {
            let duration = self::duration(duration, p);
            quote!(.idle(#duration))
        }
    }
}

fn duration(duration: &Duration, p: &TokenStream) -> TokenStream {
    match duration {
        Duration::Literal { secs, nanos, span } => {
            // Not spanned at the user's literal: lints reading its source text (`0.05`) would
            // mistake these for it (clippy's `zero_prefixed_literal`).
            let secs = syn::LitInt::new(&format!("{secs}u64"), Span::call_site());
            let nanos = syn::LitInt::new(&format!("{nanos}u32"), Span::call_site());
            quote_spanned!(*span=> #p::Duration::new(#secs, #nanos))
        }
        Duration::Expr(expr) => expr.clone(),
    }
}

fn meta_filter(filter: &MetaFilter, p: &TokenStream) -> TokenStream {
    match filter {
        MetaFilter::Value(value) => {
            quote_spanned!(value.span()=> #p::MetaFilter::Value(#p::String::from(#value)))
        }
        MetaFilter::Present(span) => quote_spanned!(*span=> #p::MetaFilter::Present),
        MetaFilter::Absent(span) => quote_spanned!(*span=> #p::MetaFilter::Absent),
        MetaFilter::Callable(callable) => {
            let span = first_span(callable);
            quote_spanned!(span=> #p::MetaFilter::callable(#callable))
        }
    }
}

fn value_filter(filter: &ValueFilter, p: &TokenStream) -> TokenStream {
    match filter {
        ValueFilter::Json(value) => {
            let span = first_span(value);
            quote_spanned!(span=> #p::ValueFilter::Value(#p::serde_json::json!(#value)))
        }
        ValueFilter::Present(span) => quote_spanned!(*span=> #p::ValueFilter::Present),
        ValueFilter::Absent(span) => quote_spanned!(*span=> #p::ValueFilter::Absent),
        ValueFilter::Callable(callable) => {
            let span = first_span(callable);
            quote_spanned!(span=> #p::ValueFilter::callable(#callable))
        }
    }
}

fn first_span(tokens: &TokenStream) -> Span {
    tokens.span()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(attribute: TokenStream, function: TokenStream) -> String {
        let function: syn::ItemFn = syn::parse2(function).unwrap();
        let krate = crate::parse::crate_path(&attribute);
        let registration = crate::validate::Registration {
            kind: Kind::Create,
            args: attribute,
            site: Span::call_site(),
        };
        let handlers = crate::validate::handlers(vec![registration], &function);
        super::handlers(handlers, krate, function).to_string()
    }

    #[test]
    fn generated_code_goes_through_the_private_module_only() {
        let code = expand(
            quote!("kopf.dev", "v1", "kopfexamples", timeout = "1m", labels(app = "web"), param = {"a": 1}),
            quote!(
                async fn create_fn(spec: &Value, name: String) -> kopf::Result<()> {
                    Ok(())
                }
            ),
        );
        let body = code.split_once("struct create_fn").unwrap().1;
        let outside: Vec<&str> = body
            .match_indices(":: kopf ::")
            .map(|(i, _)| &body[i..(i + 30).min(body.len())])
            .filter(|rest| !rest.starts_with(":: kopf :: __private ::"))
            .collect();
        assert!(outside.is_empty(), "{outside:?} in {body}");
        assert!(
            !body.contains("std ::") && !body.contains("core ::"),
            "{body}"
        );
        assert!(body.contains("Duration :: new (60u64 , 0u32)"), "{body}");
    }

    #[test]
    fn the_crate_override_replaces_every_path() {
        let code = expand(
            quote!("kopfexamples", crate = ::renamed_kopf),
            quote!(
                async fn create_fn(patch: &mut Patch) {}
            ),
        );
        let body = code.split_once("struct create_fn").unwrap().1;
        assert!(!body.contains(":: kopf ::"), "{body}");
        assert!(
            body.contains(":: renamed_kopf :: __private :: Descriptor"),
            "{body}"
        );
        let failed = expand(
            quote!("kopfexamples", crate = ::renamed_kopf, timeout = "1x"),
            quote!(
                async fn create_fn() {}
            ),
        );
        assert!(!failed.contains(":: kopf ::"), "{failed}");
        assert!(failed.contains("compile_error"), "{failed}");
    }
}
