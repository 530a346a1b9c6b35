//! The attribute's arguments as written, before their meaning is checked.
//!
//! ```text
//! #[kopf::on_update("kopf.dev", "v1", "kopfexamples", id = "scale", field = "spec.replicas",
//!                   labels("app" = "web", tier = present), optional)]
//! ```
//!
//! is a list of items: string literals and a type (the resource), `key = value`,
//! `key(entry = value, ...)` and bare flags. A value is kept as tokens; [`validate`] decides
//! what it means for its key.
//!
//! [`validate`]: crate::validate

use proc_macro2::{TokenStream, TokenTree};
use syn::ext::IdentExt as _;
use syn::parse::{ParseStream, Parser as _};
use syn::punctuated::Punctuated;
use syn::{Ident, LitStr, Token};

/// The attribute's arguments.
pub(crate) struct Attribute {
    pub(crate) items: Vec<Item>,
}

/// One comma-separated argument of the attribute.
pub(crate) enum Item {
    /// A string: part of the resource (`"kopf.dev"`, `"v1"`, `"kopfexamples"`).
    Str(LitStr),
    /// A type: the resource as a `kube::Resource` type, or a flag (`optional`).
    Type(syn::Type),
    /// `key = value`.
    Value { key: Ident, value: TokenStream },
    /// `key(entry = value, ...)`.
    List {
        key: Ident,
        entries: Vec<Entry>,
        span: proc_macro2::Span,
    },
}

/// One `key = value` of a `labels(..)` or `annotations(..)` list.
pub(crate) struct Entry {
    pub(crate) key: LitStr,
    pub(crate) value: TokenStream,
}

/// Parses the attribute's arguments.
pub(crate) fn attribute(tokens: TokenStream) -> syn::Result<Attribute> {
    let parser = |input: ParseStream<'_>| {
        Punctuated::<Item, Token![,]>::parse_terminated_with(input, Item::parse)
    };
    let items = parser.parse2(tokens)?;
    Ok(Attribute {
        items: items.into_iter().collect(),
    })
}

impl Item {
    fn parse(input: ParseStream<'_>) -> syn::Result<Item> {
        if input.peek(LitStr) {
            return Ok(Item::Str(input.parse()?));
        }
        if input.peek(Ident::peek_any) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
            let key = input.call(Ident::parse_any)?;
            input.parse::<Token![=]>()?;
            let value = value(input)?;
            if value.is_empty() {
                return Err(input.error(format!("expected a value for `{key}`")));
            }
            return Ok(Item::Value { key, value });
        }
        if input.peek(Ident::peek_any) && input.peek2(syn::token::Paren) {
            let key = input.call(Ident::parse_any)?;
            let content;
            let paren = syn::parenthesized!(content in input);
            let entries =
                Punctuated::<Entry, Token![,]>::parse_terminated_with(&content, Entry::parse)?;
            return Ok(Item::List {
                key,
                entries: entries.into_iter().collect(),
                span: paren.span.join(),
            });
        }
        match input.parse::<syn::Type>() {
            Ok(ty) => Ok(Item::Type(ty)),
            Err(_) => Err(input.error(
                "expected a resource (`\"kopf.dev\", \"v1\", \"kopfexamples\"`, `\"kopfexamples\"` or a type) or an option (`key = value`)",
            )),
        }
    }
}

impl Entry {
    fn parse(input: ParseStream<'_>) -> syn::Result<Entry> {
        let key = if input.peek(LitStr) {
            input.parse::<LitStr>()?
        } else if input.peek(Ident::peek_any) {
            let ident = input.call(Ident::parse_any)?;
            LitStr::new(&ident.to_string(), ident.span())
        } else {
            return Err(
                input.error("expected a key: `\"app.kubernetes.io/name\" = ...` or `app = ...`")
            );
        };
        input.parse::<Token![=]>()?;
        let value = value(input)?;
        if value.is_empty() {
            return Err(input.error(format!("expected a value for `{}`", key.value())));
        }
        Ok(Entry { key, value })
    }
}

/// The tokens of a value: an expression if they parse as one up to the next comma (so that
/// closures with several parameters and generic calls keep their commas), otherwise the raw
/// tokens up to the next comma (for JSON written as in `serde_json::json!`).
fn value(input: ParseStream<'_>) -> syn::Result<TokenStream> {
    let fork = input.fork();
    if let Ok(expr) = fork.parse::<syn::Expr>()
        && (fork.is_empty() || fork.peek(Token![,]))
    {
        use syn::parse::discouraged::Speculative as _;
        input.advance_to(&fork);
        return Ok(quote::ToTokens::into_token_stream(expr));
    }
    let mut tokens = TokenStream::new();
    while !input.is_empty() && !input.peek(Token![,]) {
        tokens.extend([input.parse::<TokenTree>()?]);
    }
    Ok(tokens)
}

/// The `crate = path` override, found even in arguments that do not parse, so that code
/// emitted next to errors uses it too.
pub(crate) fn crate_path(tokens: &TokenStream) -> Option<TokenStream> {
    let tokens: Vec<TokenTree> = tokens.clone().into_iter().collect();
    let start = tokens.windows(2).position(|pair| {
        matches!(&pair[0], TokenTree::Ident(ident) if ident == "crate")
            && matches!(&pair[1], TokenTree::Punct(punct) if punct.as_char() == '=')
    })?;
    let path: TokenStream = tokens[start + 2..]
        .iter()
        .take_while(|token| !matches!(token, TokenTree::Punct(punct) if punct.as_char() == ','))
        .cloned()
        .collect();
    syn::parse2::<syn::Path>(path.clone()).ok().map(|_| path)
}
