//! The `operations = [CREATE, UPDATE]` option of admission handlers: the variants of
//! `kopf::admission::Operation` it names, each once, at least one; and Kopf's deprecated
//! singular `operation = CREATE`.

use proc_macro2::TokenStream;
use syn::Ident;
use syn::spanned::Spanned as _;

use super::Errors;

/// `[CREATE, UPDATE]` (or strings): the variants of `kopf::admission::Operation`.
pub(super) fn operations(value: TokenStream, errors: &mut Errors) -> Option<Vec<Ident>> {
    use syn::parse::Parser as _;
    const EXPECTED: &str = "expected a list of operations: `operations = [CREATE, UPDATE]` (of CREATE, UPDATE, DELETE, CONNECT)";
    let span = value.span();
    let list = |input: syn::parse::ParseStream<'_>| {
        let content;
        syn::bracketed!(content in input);
        syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated(&content)
    };
    let Ok(items) = list.parse2(value) else {
        errors.at(span, EXPECTED);
        return None;
    };
    if items.is_empty() {
        errors.at(
            span,
            "`operations` cannot be empty: a webhook for no operation is never called; leave it out for all operations",
        );
        return None;
    }
    let mut variants = Vec::new();
    for item in items {
        let Some((name, variant)) = variant(&item, EXPECTED, errors) else {
            continue;
        };
        if variants.contains(&variant) {
            errors.at(variant.span(), format!("`{name}` is given twice"));
            continue;
        }
        variants.push(variant);
    }
    Some(variants)
}

/// `CREATE` (or `"CREATE"`): Kopf's deprecated singular `operation`, the variant it names.
pub(super) fn operation(value: TokenStream, errors: &mut Errors) -> Option<Ident> {
    const EXPECTED: &str = "expected an operation: `operation = CREATE` (one of CREATE, UPDATE, DELETE, CONNECT); for several, `operations = [CREATE, UPDATE]`";
    let span = value.span();
    match syn::parse2::<syn::Expr>(value) {
        Ok(item) => variant(&item, EXPECTED, errors).map(|(_, variant)| variant),
        Err(_) => {
            errors.at(span, EXPECTED);
            None
        }
    }
}

/// The name written and the variant of `Operation` it names, spanned at it.
fn variant(item: &syn::Expr, expected: &str, errors: &mut Errors) -> Option<(String, Ident)> {
    let (name, item_span) = match item {
        syn::Expr::Path(path) if path.path.get_ident().is_some() => {
            (path.path.segments[0].ident.to_string(), item.span())
        }
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(literal),
            ..
        }) => (literal.value(), literal.span()),
        _ => {
            errors.at(item.span(), expected);
            return None;
        }
    };
    let variant = match name.as_str() {
        "CREATE" => "Create",
        "UPDATE" => "Update",
        "DELETE" => "Delete",
        "CONNECT" => "Connect",
        _ => {
            errors.at(
                item_span,
                format!("unknown operation `{name}`: expected CREATE, UPDATE, DELETE or CONNECT"),
            );
            return None;
        }
    };
    Some((name, Ident::new(variant, item_span)))
}
