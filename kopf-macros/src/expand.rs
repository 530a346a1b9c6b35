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
//!     fn descriptor() -> ::kopf::__private::AnyHandler {
//!         ChangeHandler::on_create(Selector::new("kopf.dev", "v1", "kopfexamples"), "create_fn",
//!             |invocation| Box::pin(async move {
//!                 let mut slot = PatchSlot::new(&invocation);   // `patch: &mut Patch`
//!                 let mut scope = slot.scope();
//!                 let arg0 = <&Value as BorrowedArgument<'_, args::spec>>::borrow(&mut scope)?;
//!                 let arg1 = <String as OwnedArgument<args::name>>::extract(&invocation)?;
//!                 result_output(create_fn(arg0, arg1).await)
//!             }))
//!         .timeout(Duration::new(10, 0))
//!         .into()
//!     }
//! }
//!
//! inventory::submit! { Collected::new(<create_fn as Descriptor>::descriptor, module_path!(), line!()) }
//! ```
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

/// The function, plus its descriptor when the handler is valid, or plus the errors.
pub(crate) fn handler(
    handler: syn::Result<Handler>,
    krate: Option<TokenStream>,
    mut function: syn::ItemFn,
) -> TokenStream {
    // Handlers ask for arguments by name, so many parameters are the normal case.
    function.attrs.push(syn::parse_quote!(#[allow(
        clippy::too_many_arguments,
        reason = "handler arguments are asked for by name"
    )]));
    match handler {
        Ok(handler) => {
            let descriptor = descriptor(&handler, &function);
            quote! {
                #function
                #descriptor
            }
        }
        Err(errors) => {
            let errors = errors.to_compile_error();
            let krate = krate.unwrap_or_else(|| quote!(::kopf));
            // A method sits in an `impl`, where the descriptor type cannot go; a stacked
            // attribute emits its own.
            let placeholder = if function.sig.receiver().is_some()
                || crate::validate::stacked(&function).is_some()
            {
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

fn descriptor(handler: &Handler, function: &syn::ItemFn) -> TokenStream {
    let krate = &handler.krate;
    let p = quote!(#krate::__private);
    let vis = &function.vis;
    let name = &function.sig.ident;
    let selector = selector(&handler.resource, &p);
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
    };
    let setters = handler
        .options
        .iter()
        .map(|setter| self::setter(setter, &p));
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
            fn descriptor() -> #p::AnyHandler {
                #p::AnyHandler::from(#constructor #(#setters)*)
            }
        }

        #p::inventory::submit! {
            #p::Collected::new(
                <#name as #p::Descriptor>::descriptor,
                #p::module_path!(),
                #p::line!(),
            )
        }
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
            fn descriptor() -> #p::AnyHandler {
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
        let conversion = conversion(argument, p, &invocation, &scope);
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
    let body = quote! {
        let #invocation = &#invocation;
        let mut __kopf_patch = #p::PatchSlot::new(#invocation);
        #[allow(unused_mut, unused_variables, reason = "not every handler borrows")]
        let mut #scope = __kopf_patch.scope();
        #(#bindings)*
        #result
    };
    match function.sig.asyncness {
        Some(_) => quote! {
            |#invocation: #p::Invocation| -> #p::HandlerFuture {
                #p::Box::pin(async move { #body })
            }
        },
        // A sync handler runs on the operator's own threads.
        None => quote! {
            #p::blocking(|#invocation: #p::Invocation| -> #p::HandlerResult { #body })
        },
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
    if argument.borrowed {
        quote_spanned!(span=> <#ty as #p::BorrowedArgument<'_, #p::args::#marker>>::borrow(&mut #scope))
    } else {
        quote_spanned!(span=> <#ty as #p::OwnedArgument<#p::args::#marker>>::extract(#invocation))
    }
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
    }
}

fn duration(duration: &Duration, p: &TokenStream) -> TokenStream {
    match duration {
        Duration::Literal { secs, nanos, span } => {
            let secs = syn::LitInt::new(&format!("{secs}u64"), *span);
            let nanos = syn::LitInt::new(&format!("{nanos}u32"), *span);
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
        let parsed = crate::parse::attribute(attribute);
        let handler = crate::validate::handler(Kind::Create, parsed, &function);
        super::handler(handler, krate, function).to_string()
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
