//! Finding the crate-internal paths that one source file names, by a scan over its tokens.
//!
//! Tokenising drops comments and turns doc comments and string literals into literals, so
//! only code is seen, macro bodies included. A path is crate-internal when it starts with
//! `crate`, `$crate`, `self` or `super`, with the name of a module declared in the scope
//! (`mod x;` or `mod x { }`: Rust's uniform paths), or with a name a `use` of such a path
//! brought into the scope. `use` groups (`crate::{a::X, b::{c, d}}`) give one path per leaf.
//! Inline modules are scopes of their own, so `super` in a `mod tests { }` means the file's
//! module; the paths they name count as the file's.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr as _;

use proc_macro2::{Delimiter, LexError, Spacing, TokenStream, TokenTree};

/// A path from the crate root, as its segments.
pub(crate) type Segments = Vec<String>;

/// Every crate-internal path that `source`, the file of the module at `module`, names, from
/// the crate root. `file_children` are the modules that files below it define.
pub(crate) fn internal_paths(
    source: &str,
    module: &[String],
    file_children: &BTreeSet<String>,
) -> Result<Vec<Segments>, LexError> {
    let tokens = tokens(TokenStream::from_str(source)?);
    let mut paths = Vec::new();
    Scope::new(&tokens, module.to_vec(), file_children.clone()).scan(&tokens, &mut paths);
    Ok(paths)
}

fn tokens(stream: TokenStream) -> Vec<TokenTree> {
    stream.into_iter().collect()
}

/// One place a path ends: what it names, and the name a `use` brings into scope for it.
struct Leaf {
    path: Segments,
    name: Option<String>,
}

/// A module's scope: where it is, which modules it declares, and what its `use`s name.
struct Scope {
    here: Segments,
    children: BTreeSet<String>,
    aliases: BTreeMap<String, Segments>,
}

impl Scope {
    fn new(tokens: &[TokenTree], here: Segments, mut children: BTreeSet<String>) -> Self {
        declared_modules(tokens, &mut children);
        let mut scope = Scope {
            here,
            children,
            aliases: BTreeMap::new(),
        };
        let mut aliases = BTreeMap::new();
        scope.collect_aliases(tokens, &mut aliases);
        scope.aliases = aliases;
        scope
    }

    /// The names that the scope's `use` items bring in for crate-internal paths.
    fn collect_aliases(&self, tokens: &[TokenTree], aliases: &mut BTreeMap<String, Segments>) {
        let mut i = 0;
        while i < tokens.len() {
            if let Some(skip) = inline_module(tokens, i)
                .map(|_| 3)
                .or_else(|| visibility(tokens, i))
            {
                i += skip;
                continue;
            }
            match &tokens[i] {
                TokenTree::Group(group) => {
                    self.collect_aliases(&tokens_of(group), aliases);
                }
                TokenTree::Ident(ident) if ident == "use" => {
                    if let Some((base, next)) = self.start(tokens, i + 1) {
                        let mut leaves = Vec::new();
                        i = rest(tokens, next, base, &mut leaves);
                        for leaf in leaves {
                            if let Some(name) = leaf.name {
                                aliases.insert(name, leaf.path);
                            }
                        }
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// Collects every crate-internal path in `tokens` into `paths`.
    fn scan(&self, tokens: &[TokenTree], paths: &mut Vec<Segments>) {
        let mut i = 0;
        while i < tokens.len() {
            if let Some((name, body)) = inline_module(tokens, i) {
                let mut here = self.here.clone();
                here.push(name);
                let body = tokens_of(&body);
                Scope::new(&body, here, BTreeSet::new()).scan(&body, paths);
                i += 3;
                continue;
            }
            if let Some(skip) = visibility(tokens, i) {
                i += skip;
                continue;
            }
            if let TokenTree::Group(group) = &tokens[i] {
                self.scan(&tokens_of(group), paths);
                i += 1;
                continue;
            }
            if !follows_path_separator(tokens, i)
                && let Some((base, next)) = self.start(tokens, i)
            {
                let mut leaves = Vec::new();
                i = rest(tokens, next, base, &mut leaves);
                paths.extend(leaves.into_iter().map(|leaf| leaf.path));
                continue;
            }
            i += 1;
        }
    }

    /// Where a crate-internal path starting at `tokens[i]` leads after its first segments
    /// (`crate`, `self`, `super::super`, a declared module or a `use`d name), and the index of
    /// the `::` that follows them.
    fn start(&self, tokens: &[TokenTree], i: usize) -> Option<(Segments, usize)> {
        let TokenTree::Ident(ident) = tokens.get(i)? else {
            return None;
        };
        if !is_path_separator(tokens, i + 1) {
            return None;
        }
        let name = ident.to_string();
        let mut base = match name.as_str() {
            "crate" => Vec::new(),
            "self" => self.here.clone(),
            "super" => parent(&self.here)?,
            _ if self.children.contains(&name) => {
                let mut base = self.here.clone();
                base.push(name);
                base
            }
            _ => self.aliases.get(&name)?.clone(),
        };
        let mut next = i + 1;
        while matches!(&tokens.get(next + 2), Some(TokenTree::Ident(ident)) if ident == "super")
            && is_path_separator(tokens, next + 3)
        {
            base = parent(&base)?;
            next += 3;
        }
        Some((base, next))
    }
}

/// Reads the rest of a path from `tokens[i]` on (`::a::b`, `::{x, y}`, `::*`, `as name`),
/// adding a leaf for each place it ends; returns the index after it.
fn rest(tokens: &[TokenTree], mut i: usize, mut path: Segments, leaves: &mut Vec<Leaf>) -> usize {
    while is_path_separator(tokens, i) {
        match tokens.get(i + 2) {
            Some(TokenTree::Ident(ident)) => {
                path.push(ident.to_string());
                i += 3;
            }
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                use_group(&tokens_of(group), &path, leaves);
                return i + 3;
            }
            Some(TokenTree::Punct(punct)) if punct.as_char() == '*' => {
                leaves.push(Leaf { path, name: None });
                return i + 3;
            }
            _ => break,
        }
    }
    let (name, i) = renamed(tokens, i).unwrap_or_else(|| (path.last().cloned(), i));
    leaves.push(Leaf { path, name });
    i
}

/// The leaves of a `use` group `{a::X, b::{c, d}, self, *}` below `prefix`.
fn use_group(tokens: &[TokenTree], prefix: &[String], leaves: &mut Vec<Leaf>) {
    let items = tokens.split(|token| matches!(token, TokenTree::Punct(p) if p.as_char() == ','));
    for item in items {
        match item.first() {
            Some(TokenTree::Ident(ident)) if ident == "self" => {
                let (name, _) = renamed(item, 1).unwrap_or_else(|| (prefix.last().cloned(), 1));
                leaves.push(Leaf {
                    path: prefix.to_vec(),
                    name,
                });
            }
            Some(TokenTree::Ident(ident)) => {
                let mut path = prefix.to_vec();
                path.push(ident.to_string());
                rest(item, 1, path, leaves);
            }
            Some(TokenTree::Punct(punct)) if punct.as_char() == '*' => {
                leaves.push(Leaf {
                    path: prefix.to_vec(),
                    name: None,
                });
            }
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                use_group(&tokens_of(group), prefix, leaves);
            }
            _ => {}
        }
    }
}

/// `as name` at `tokens[i]`: the new name (none for `as _`) and the index after it.
fn renamed(tokens: &[TokenTree], i: usize) -> Option<(Option<String>, usize)> {
    match (tokens.get(i), tokens.get(i + 1)) {
        (Some(TokenTree::Ident(keyword)), Some(TokenTree::Ident(name))) if keyword == "as" => {
            Some((Some(name.to_string()), i + 2))
        }
        (Some(TokenTree::Ident(keyword)), Some(TokenTree::Punct(_))) if keyword == "as" => {
            Some((None, i + 2))
        }
        _ => None,
    }
}

/// Adds the names of the modules declared in `tokens` (`mod x;`, `mod x { }`), not looking
/// inside inline modules, which are scopes of their own.
fn declared_modules(tokens: &[TokenTree], names: &mut BTreeSet<String>) {
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(ident) if ident == "mod" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    names.insert(name.to_string());
                }
            }
            TokenTree::Group(group) if !(i >= 2 && inline_module(tokens, i - 2).is_some()) => {
                declared_modules(&tokens_of(group), names);
            }
            _ => {}
        }
    }
}

/// `mod name { body }` at `tokens[i]`: its name and body.
fn inline_module(tokens: &[TokenTree], i: usize) -> Option<(String, proc_macro2::Group)> {
    match (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2)) {
        (
            Some(TokenTree::Ident(keyword)),
            Some(TokenTree::Ident(name)),
            Some(TokenTree::Group(body)),
        ) if keyword == "mod" && body.delimiter() == Delimiter::Brace => {
            Some((name.to_string(), body.clone()))
        }
        _ => None,
    }
}

/// How many tokens a restricted visibility at `tokens[i]` spans (`pub(crate)`,
/// `pub(in crate::a)`): the path in it says who may see an item, not what the code uses.
fn visibility(tokens: &[TokenTree], i: usize) -> Option<usize> {
    match (tokens.get(i), tokens.get(i + 1)) {
        (Some(TokenTree::Ident(keyword)), Some(TokenTree::Group(group)))
            if keyword == "pub" && group.delimiter() == Delimiter::Parenthesis =>
        {
            Some(2)
        }
        _ => None,
    }
}

fn tokens_of(group: &proc_macro2::Group) -> Vec<TokenTree> {
    tokens(group.stream())
}

fn parent(path: &[String]) -> Option<Segments> {
    path.split_last().map(|(_, parent)| parent.to_vec())
}

/// Whether `tokens[i..]` starts with `::`.
fn is_path_separator(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(first)), Some(TokenTree::Punct(second)))
            if first.as_char() == ':' && first.spacing() == Spacing::Joint && second.as_char() == ':'
    )
}

/// Whether `tokens[i]` comes right after a `::`, so is not the start of a path.
fn follows_path_separator(tokens: &[TokenTree], i: usize) -> bool {
    i >= 2 && is_path_separator(tokens, i - 2)
}
