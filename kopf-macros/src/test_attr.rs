//! `#[kopf_testing::test]`: an `async fn` test that gets a started `OperatorHarness`, run on a
//! runtime of its own, with the operator stopped and checked after the body. The attribute
//! only parses and checks; the running is `::kopf_testing::__private::run`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned as _;
use syn::{Expr, FnArg, Ident, ItemFn, Path, ReturnType, Token, Type};

/// The attribute's options.
#[derive(Default)]
struct Options {
    handlers: Option<Vec<Path>>,
    crds: Vec<Type>,
    apply: Vec<Expr>,
    settings: Option<Expr>,
    apiserver: Option<Expr>,
}

impl Parse for Options {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut options = Options::default();
        let mut errors: Option<syn::Error> = None;
        while !input.is_empty() {
            let name: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            match name.to_string().as_str() {
                "handlers" => {
                    let content;
                    syn::bracketed!(content in input);
                    let paths = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                    options.handlers = Some(paths.into_iter().collect());
                }
                "crds" => {
                    let content;
                    syn::bracketed!(content in input);
                    let types = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                    options.crds.extend(types);
                }
                "apply" => options.apply.push(input.parse()?),
                "settings" => options.settings = Some(input.parse()?),
                "apiserver" => options.apiserver = Some(input.parse()?),
                other => {
                    let error = syn::Error::new(
                        name.span(),
                        format!(
                            "unknown option `{other}` of `#[kopf_testing::test]`; \
                             the options are `handlers = [..]`, `crds = [..]`, `apply = \"yaml\"`, `settings = ..`, `apiserver = real`"
                        ),
                    );
                    match &mut errors {
                        Some(errors) => errors.combine(error),
                        None => errors = Some(error),
                    }
                    // Skip the value, to report every unknown option at once.
                    input.parse::<Expr>()?;
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        match errors {
            Some(errors) => Err(errors),
            None => Ok(options),
        }
    }
}

/// How the test's function takes the harness.
enum Takes {
    Nothing,
    Value,
    Reference,
}

/// Expands `#[kopf_testing::test(options)] async fn name(harness: OperatorHarness) { .. }`.
pub(crate) fn expand(args: TokenStream, function: ItemFn) -> TokenStream {
    let options = syn::parse2::<Options>(args);
    let takes = check(&function);
    let (options, takes) = match (options, takes) {
        (Ok(options), Ok(takes)) => (options, takes),
        (options, takes) => {
            let errors = [options.err(), takes.err()]
                .into_iter()
                .flatten()
                .reduce(|mut all, error| {
                    all.combine(error);
                    all
                })
                .expect("one of them failed");
            let errors = errors.to_compile_error();
            // The function as written, so the rest of the crate still compiles.
            return quote! { #errors #[allow(dead_code)] #function };
        }
    };

    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = function;
    let name = &sig.ident;
    let output = match &sig.output {
        ReturnType::Default => quote! {},
        ReturnType::Type(arrow, ty) => quote! { #arrow #ty },
    };
    let private = quote! { ::kopf_testing::__private };
    let registry = match &options.handlers {
        Some(handlers) => quote! { #private::kopf::handlers![#(#handlers),*] },
        None => quote! { #private::kopf::registry::Registry::collected() },
    };
    let crds = &options.crds;
    let apply = &options.apply;
    let settings = options.settings.iter();
    let apiserver = options.apiserver.iter().map(|choice| match choice {
        // `real` and `fake` name the kinds; anything else is an `ApiServer` expression.
        Expr::Path(path) if path.path.is_ident("real") => quote! { #private::ApiServer::Real },
        Expr::Path(path) if path.path.is_ident("fake") => quote! { #private::ApiServer::Fake },
        other => quote! { #other },
    });
    let body = match takes {
        Takes::Nothing => quote! {
            |harness| async move {
                let output = #name().await;
                ::core::mem::drop(harness);
                output
            }
        },
        Takes::Value => quote! { #name },
        Takes::Reference => quote! { |harness| async move { #name(&harness).await } },
    };
    let builder_span = sig.ident.span();
    let builder = quote_spanned! {builder_span=>
        #private::OperatorHarness::builder()
            #(.crd::<#crds>())*
            #(.apply(#apply))*
            #(.settings(#settings))*
            #(.apiserver(#apiserver))*
    };
    quote! {
        #(#attrs)*
        #[::core::prelude::v1::test]
        #vis fn #name() #output {
            #sig #block
            #private::run(#builder, #registry, #body)
        }
    }
}

/// Checks the function: `async`, not generic, and taking the harness or nothing.
fn check(function: &ItemFn) -> syn::Result<Takes> {
    let sig = &function.sig;
    let mut errors: Vec<syn::Error> = Vec::new();
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span(),
            "`#[kopf_testing::test]` needs an `async fn`: it runs the test on a tokio runtime of its own",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.push(syn::Error::new(
            sig.generics.span(),
            "a `#[kopf_testing::test]` function cannot be generic",
        ));
    }
    let mut takes = Takes::Nothing;
    for (index, input) in sig.inputs.iter().enumerate() {
        match input {
            FnArg::Typed(typed) if index == 0 => {
                takes = match &*typed.ty {
                    Type::Reference(_) => Takes::Reference,
                    _ => Takes::Value,
                }
            }
            _ => errors.push(syn::Error::new(
                input.span(),
                "a `#[kopf_testing::test]` function takes one argument, the harness: \
                 `harness: kopf_testing::OperatorHarness` (or `&OperatorHarness`), or none",
            )),
        }
    }
    match errors.into_iter().reduce(|mut all, error| {
        all.combine(error);
        all
    }) {
        Some(errors) => Err(errors),
        None => Ok(takes),
    }
}
