//! The no-cycles rule: inside a crate, the modules depend on each other in one direction,
//! so that each can be read, tested and moved knowing only what it names.
//!
//! # The graph
//!
//! One graph per compilation target (every library, binary, test, example and bench target
//! of every workspace member, found with `cargo metadata`):
//!
//! - **Nodes** are module files: the target's root file and every file a `mod name;`
//!   declaration loads (`name.rs`, `name/mod.rs` or a `#[path]`). An inline module
//!   (`mod tests { … }`) belongs to the file it is written in.
//! - **References**: A names B when A's code names a path into B. The paths are those of
//!   `use` declarations (each leaf of a `use` tree), of expressions, types and patterns, and
//!   the `::`-separated sequences inside macro invocations, that start with `crate::`,
//!   `super::`, `self::`, or with a name that a `use` of the same file bound to a module.
//!   Each path is resolved (`super` and `self` against the inline module the path is written
//!   in) to the longest prefix that is a known module: `crate::measure::l2::Line` names
//!   `measure/l2/mod.rs` if that is a module and `Line` is not. Paths that start with any
//!   other name (a local item, an external crate, a child module) are not followed. Code
//!   under `#[cfg(test)]` or `#[test]` does not count: an inline test module is a leaf that
//!   no other module names, so it cannot take part in a cycle of its own, and counting its
//!   paths as its file's would blame a module for its tests comparing it with a sibling.
//! - A reference from a module to one of its **ancestors or descendants** is ignored: a
//!   child uses its parent's items, a parent declares its children and re-exports their
//!   items — the normal shape of a module tree.
//! - **Edges**: a module stands for itself and its descendants. A reference from A to B
//!   (neither the other's ancestor) is an edge between the two siblings, children of A's and
//!   B's nearest common ancestor, that contain them: `measure/bench/dsmem.rs` naming
//!   `measure/report/clusters.rs` would be the edge `measure/bench/mod.rs` →
//!   `measure/report/mod.rs`. (Where A and B are siblings, that is A → B itself.)
//!
//! A **cycle** is a strongly connected component of more than one module; its modules are
//! siblings. The rule reports each with every reference that makes one of its edges; the
//! fix is to move the item both sides need to where it belongs (often the parent, or a new
//! sibling both use).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fs,
    path::{Path, PathBuf},
};

mod paths;
#[cfg(test)]
mod tests;

/// One module file of a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Its logical path below the crate root (empty for the root).
    pub path: Vec<String>,
    /// Its file.
    pub file: PathBuf,
}

/// One place where a module names a path into another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The naming module (index into [`Graph::modules`]).
    pub from: usize,
    /// The named module.
    pub to: usize,
    /// 1-based line in `from`'s file.
    pub line: usize,
    /// The path as written, `::`-separated.
    pub text: String,
}

/// The module graph of one target.
#[derive(Debug)]
pub struct Graph {
    /// Its module files, the root first.
    pub modules: Vec<Module>,
    /// The first reference (by line) from each module to each other module that is neither
    /// its ancestor nor its descendant, ordered by (from, to).
    pub references: Vec<Reference>,
}

impl Graph {
    /// The module graph of the target whose root file is `root`.
    ///
    /// # Errors
    /// A file that cannot be read or parsed, or a `mod` declaration without its file.
    pub fn load(root: &Path) -> Result<Graph, String> {
        let mut modules = Vec::new();
        let mut files = Vec::new();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        discover(root, Vec::new(), dir, &mut modules, &mut files)?;
        let known: HashMap<Vec<String>, usize> = modules
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect();
        let mut first: BTreeMap<(usize, usize), Reference> = BTreeMap::new();
        for (from, file) in files.iter().enumerate() {
            for (path, line, text) in paths::named(file, &modules[from].path, &known) {
                let Some(to) = longest_known(&known, &path) else {
                    continue;
                };
                let (a, b) = (&modules[from].path, &modules[to].path);
                if a.starts_with(b) || b.starts_with(a) {
                    continue;
                }
                let reference = Reference {
                    from,
                    to,
                    line,
                    text,
                };
                first
                    .entry((from, to))
                    .and_modify(|r| {
                        if line < r.line {
                            *r = reference.clone();
                        }
                    })
                    .or_insert(reference);
            }
        }
        Ok(Graph {
            modules,
            references: first.into_values().collect(),
        })
    }

    /// The edge a reference makes: the siblings that contain its two ends.
    fn edge(&self, reference: &Reference) -> Option<(usize, usize)> {
        let (a, b) = (
            &self.modules[reference.from].path,
            &self.modules[reference.to].path,
        );
        let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let find = |path: &[String]| {
            (0..=path.len())
                .rev()
                .find_map(|n| self.modules.iter().position(|m| m.path == path[..n]))
        };
        let from = find(&a[..(common + 1).min(a.len())])?;
        let to = find(&b[..(common + 1).min(b.len())])?;
        (from != to).then_some((from, to))
    }

    /// The cycles: each strongly connected component of more than one module, as sorted
    /// module indices, in order of their first module.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let n = self.modules.len();
        let mut next = vec![Vec::new(); n];
        for (from, to) in self.references.iter().filter_map(|r| self.edge(r)) {
            next[from].push(to);
        }
        let reach = |start: usize| {
            let mut seen = vec![false; n];
            let mut stack = vec![start];
            while let Some(v) = stack.pop() {
                for &w in &next[v] {
                    if !seen[w] {
                        seen[w] = true;
                        stack.push(w);
                    }
                }
            }
            seen
        };
        let reaches: Vec<Vec<bool>> = (0..n).map(reach).collect();
        let mut placed = vec![false; n];
        let mut cycles = Vec::new();
        for v in 0..n {
            if placed[v] {
                continue;
            }
            let component: Vec<usize> = (0..n)
                .filter(|&w| w == v || (reaches[v][w] && reaches[w][v]))
                .collect();
            for &w in &component {
                placed[w] = true;
            }
            if component.len() > 1 {
                cycles.push(component);
            }
        }
        cycles
    }

    /// One cycle described: its modules, then each reference that makes one of its edges.
    fn describe(&self, cycle: &[usize], base: &Path) -> String {
        let show = |i: usize| shown(&self.modules[i].file, base);
        let heading = cycle
            .iter()
            .map(|&i| show(i))
            .collect::<Vec<_>>()
            .join(" ↔ ");
        let mut references: Vec<&Reference> = self
            .references
            .iter()
            .filter(|r| {
                self.edge(r)
                    .is_some_and(|(from, to)| cycle.contains(&from) && cycle.contains(&to))
            })
            .collect();
        references.sort_by_key(|r| (show(r.from), r.line, show(r.to)));
        let mut lines = vec![heading];
        lines.extend(references.into_iter().map(|r| {
            format!(
                "    {}:{} names {} ({})",
                show(r.from),
                r.line,
                show(r.to),
                r.text
            )
        }));
        lines.join("\n")
    }
}

/// `file` relative to `base`, `/`-separated.
fn shown(file: &Path, base: &Path) -> String {
    file.strip_prefix(base)
        .unwrap_or(file)
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Loads `file` as the module at `path`, then the files its `mod` declarations load
/// (children of a module file live in `children`).
fn discover(
    file: &Path,
    path: Vec<String>,
    children: PathBuf,
    modules: &mut Vec<Module>,
    files: &mut Vec<syn::File>,
) -> Result<(), String> {
    let text =
        fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let parsed =
        syn::parse_file(&text).map_err(|e| format!("cannot parse {}: {e}", file.display()))?;
    let items = parsed.items.clone();
    modules.push(Module {
        path: path.clone(),
        file: file.to_path_buf(),
    });
    files.push(parsed);
    let here = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    discover_items(&items, &path, &children, &here, modules, files)
}

/// The `mod` declarations among `items` (of the module at `path`, whose children live in
/// `children`; `here` is the directory of the file they are written in).
fn discover_items(
    items: &[syn::Item],
    path: &[String],
    children: &Path,
    here: &Path,
    modules: &mut Vec<Module>,
    files: &mut Vec<syn::File>,
) -> Result<(), String> {
    for item in items {
        let syn::Item::Mod(m) = item else {
            continue;
        };
        let name = m.ident.to_string();
        let mut child = path.to_vec();
        child.push(name.clone());
        if let Some((_, inline)) = &m.content {
            discover_items(inline, &child, &children.join(&name), here, modules, files)?;
            continue;
        }
        let (file, grandchildren) = match path_attribute(&m.attrs) {
            Some(p) => {
                let file = here.join(p);
                let dir = file.parent().unwrap_or(here).to_path_buf();
                let is_mod_rs = file.file_name().is_some_and(|f| f == "mod.rs");
                (file.clone(), if is_mod_rs { dir } else { dir.join(&name) })
            }
            None => {
                let flat = children.join(format!("{name}.rs"));
                let nested = children.join(&name).join("mod.rs");
                if flat.is_file() {
                    (flat, children.join(&name))
                } else if nested.is_file() {
                    (nested, children.join(&name))
                } else {
                    return Err(format!(
                        "module `{}`: neither {} nor {} exists",
                        child.join("::"),
                        flat.display(),
                        nested.display()
                    ));
                }
            }
        };
        discover(&file, child, grandchildren, modules, files)?;
    }
    Ok(())
}

/// The value of a `#[path = "…"]` attribute.
fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The known module that is the longest prefix of `path` (the root at worst).
fn longest_known(known: &HashMap<Vec<String>, usize>, path: &[String]) -> Option<usize> {
    (0..=path.len())
        .rev()
        .find_map(|n| known.get(&path[..n]).copied())
}

/// One compilation target: its package, kind and name, and its root file.
#[derive(Debug)]
struct Target {
    label: String,
    package_dir: PathBuf,
    root: PathBuf,
}

/// Every target of every workspace member, by `cargo metadata`.
fn targets(workspace: &Path) -> Result<Vec<Target>, String> {
    let metadata = crate::metadata::read(workspace, false)?;
    let mut seen = BTreeSet::new();
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let name = package["name"].as_str().unwrap_or("?");
        let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap_or_default());
        let package_dir = manifest.parent().unwrap_or(workspace).to_path_buf();
        for target in package["targets"].as_array().into_iter().flatten() {
            let src = target["src_path"].as_str().unwrap_or_default();
            let root = fs::canonicalize(src).map_err(|e| format!("{src}: {e}"))?;
            if !seen.insert(root.clone()) {
                continue;
            }
            let kind = target["kind"][0].as_str().unwrap_or("?");
            let target_name = target["name"].as_str().unwrap_or("?");
            targets.push(Target {
                label: format!("{name} ({kind} {target_name})"),
                package_dir: package_dir.clone(),
                root,
            });
        }
    }
    Ok(targets)
}

/// Checks the rule for every target of the workspace (`cargo xtask cycles`, and in
/// `cargo xtask lint`).
///
/// # Errors
/// Each cycle with the places that close it; or a target that cannot be read.
pub fn check(workspace: &Path) -> Result<(), String> {
    let targets = targets(workspace)?;
    let mut problems = Vec::new();
    let mut count = 0;
    for target in &targets {
        let graph = Graph::load(&target.root)?;
        let base = fs::canonicalize(&target.package_dir).unwrap_or(target.package_dir.clone());
        for cycle in graph.cycles() {
            count += 1;
            problems.push(format!(
                "{}: {}",
                target.label,
                graph.describe(&cycle, &base)
            ));
        }
    }
    if problems.is_empty() {
        eprintln!(
            "xtask: no import cycles in the modules of {} targets",
            targets.len()
        );
        Ok(())
    } else {
        problems.push(format!(
            "{count} import cycles: move what both sides need to where it belongs \
             (xtask/src/cycles/mod.rs defines the graph)"
        ));
        Err(problems.join("\n"))
    }
}
