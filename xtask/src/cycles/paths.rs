//! The module paths one file names: every `use` leaf, every path of an expression, type or
//! pattern, and the `a::b::c` sequences inside macro invocations, outside test code, made
//! absolute against the module they are written in.

use std::collections::HashMap;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// The paths `file` (the module at `scope`) names that resolve, each made absolute below the
/// crate root, with its line and its text as written. `known` holds every module's path.
pub(super) fn named(
    file: &syn::File,
    scope: &[String],
    known: &HashMap<Vec<String>, usize>,
) -> Vec<(Vec<String>, usize, String)> {
    let mut names = Names {
        known,
        aliases: HashMap::new(),
        scope: scope.to_vec(),
        found: Vec::new(),
    };
    names.aliases = names.module_aliases(file);
    names.visit_file(file);
    names.found
}

/// Collects the module paths one file names.
struct Names<'a> {
    known: &'a HashMap<Vec<String>, usize>,
    /// Names a `use` of this file bound to a module, with the module's path.
    aliases: HashMap<String, Vec<String>>,
    /// The (possibly inline) module the visitor is in.
    scope: Vec<String>,
    /// (absolute path, line, text) of each path that resolved.
    found: Vec<(Vec<String>, usize, String)>,
}

impl Names<'_> {
    /// `segments` made absolute (below the crate root), if it starts with `crate`, `self`,
    /// `super` or an alias.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut path = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.scope.clone(),
            "super" => {
                let mut p = self.scope.clone();
                p.pop()?;
                p
            }
            other => {
                let mut p = self.aliases.get(other)?.clone();
                p.extend(rest.iter().cloned());
                return Some(p);
            }
        };
        let mut rest = rest.iter();
        let mut tail = Vec::new();
        for segment in rest.by_ref() {
            if segment == "super" && tail.is_empty() {
                path.pop()?;
            } else {
                tail.push(segment.clone());
            }
        }
        path.extend(tail);
        Some(path)
    }

    /// Records `segments`, named at `line`, if it resolves.
    fn record(&mut self, segments: Vec<String>, line: usize) {
        if let Some(path) = self.resolve(&segments) {
            self.found.push((path, line, segments.join("::")));
        }
    }

    /// The names this file's `use` declarations bind to known modules (`use crate::a;`,
    /// `use super::{b as c}`), resolved in the scope of the file's module.
    fn module_aliases(&self, file: &syn::File) -> HashMap<String, Vec<String>> {
        let mut aliases = HashMap::new();
        for item in &file.items {
            let syn::Item::Use(u) = item else { continue };
            if is_test(&u.attrs) {
                continue;
            }
            let mut leaves = Vec::new();
            use_leaves(&u.tree, Vec::new(), &mut leaves);
            for (segments, bound) in leaves {
                let Some(bound) = bound else { continue };
                if let Some(path) = self.resolve(&segments) {
                    if self.known.contains_key(&path) {
                        aliases.insert(bound, path);
                    }
                }
            }
        }
        aliases
    }
}

/// Each leaf of a `use` tree: its full path and the name it binds (`None` for a glob, whose
/// path is then the module globbed).
fn use_leaves(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let with = |name: String| {
        let mut p = prefix.clone();
        p.push(name);
        p
    };
    match tree {
        syn::UseTree::Path(p) => use_leaves(&p.tree, with(p.ident.to_string()), out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            let bound = prefix.last().cloned();
            out.push((prefix, bound));
        }
        syn::UseTree::Name(n) => out.push((with(n.ident.to_string()), Some(n.ident.to_string()))),
        syn::UseTree::Rename(r) if r.ident == "self" => {
            out.push((prefix, Some(r.rename.to_string())))
        }
        syn::UseTree::Rename(r) => {
            out.push((with(r.ident.to_string()), Some(r.rename.to_string())))
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix.clone(), out);
            }
        }
    }
}

/// Whether `attrs` make an item test code: `#[test]`, or `#[cfg(test)]` (also inside
/// `all(…)`).
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>().is_ok_and(|m| match m {
                    syn::Meta::Path(p) => p.is_ident("test"),
                    syn::Meta::List(l) if l.path.is_ident("all") => l
                        .tokens
                        .into_iter()
                        .any(|t| matches!(t, TokenTree::Ident(i) if i == "test")),
                    _ => false,
                }))
    })
}

/// The attributes of an item.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Names<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !is_test(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // A file module's items are visited from its own file.
        if m.content.is_some() {
            self.scope.push(m.ident.to_string());
            visit::visit_item_mod(self, m);
            self.scope.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        let mut leaves = Vec::new();
        use_leaves(&u.tree, Vec::new(), &mut leaves);
        for (segments, _) in leaves {
            self.record(segments, line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(segments, line);
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        for (segments, line) in token_paths(mac.tokens.clone()) {
            self.record(segments, line);
        }
    }
}

/// The `a::b::c` sequences in a macro's tokens (nested groups included), with their lines.
fn token_paths(tokens: TokenStream) -> Vec<(Vec<String>, usize)> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if let TokenTree::Group(g) = &tokens[i] {
            paths.extend(token_paths(g.stream()));
        }
        let TokenTree::Ident(first) = &tokens[i] else {
            i += 1;
            continue;
        };
        // A path does not start after `::` (`<T as a::B>::c`: `c` is no module).
        if i >= 2 && is_colons(&tokens[i - 2], &tokens[i - 1]) {
            i += 1;
            continue;
        }
        let mut segments = vec![first.to_string()];
        let line = first.span().start().line;
        let mut j = i + 1;
        while j + 2 < tokens.len() && is_colons(&tokens[j], &tokens[j + 1]) {
            match &tokens[j + 2] {
                TokenTree::Ident(next) => {
                    segments.push(next.to_string());
                    j += 3;
                }
                _ => break,
            }
        }
        if segments.len() > 1 {
            paths.push((segments, line));
        }
        i = j.max(i + 1);
    }
    paths
}

/// Whether `a b` is the `::` token.
fn is_colons(a: &TokenTree, b: &TokenTree) -> bool {
    matches!((a, b), (TokenTree::Punct(x), TokenTree::Punct(y))
        if x.as_char() == ':' && y.as_char() == ':' && x.spacing() == proc_macro2::Spacing::Joint)
}
