//! The rule on synthetic crates written to a scratch directory.

use super::*;
use crate::scratch::Scratch;

/// The cycles of the crate rooted at `root` in `scratch`, as file lists relative to it.
fn cycles_of(scratch: &Scratch, root: &str) -> Vec<Vec<String>> {
    let graph = Graph::load(&scratch.path().join(root)).expect("loads");
    graph
        .cycles()
        .into_iter()
        .map(|c| {
            c.into_iter()
                .map(|i| shown(&graph.modules[i].file, scratch.path()))
                .collect()
        })
        .collect()
}

#[test]
fn a_cycle_between_siblings_is_found_with_its_references() {
    let scratch = Scratch::new("cycles-siblings");
    scratch.write("src/lib.rs", "mod a;\nmod b;\nmod c;\n");
    scratch.write("src/a.rs", "use crate::b::B;\npub struct A(B);\n");
    scratch.write(
        "src/b.rs",
        "pub struct B;\nfn f() -> super::a::A { todo!() }\n",
    );
    scratch.write("src/c.rs", "use crate::{a::A, b::B};\n");
    assert_eq!(
        cycles_of(&scratch, "src/lib.rs"),
        vec![vec!["src/a.rs".to_owned(), "src/b.rs".to_owned()]]
    );
    let graph = Graph::load(&scratch.path().join("src/lib.rs")).expect("loads");
    let text = graph.describe(&graph.cycles()[0], scratch.path());
    assert_eq!(
        text,
        "src/a.rs ↔ src/b.rs\n    src/a.rs:1 names src/b.rs (crate::b::B)\n    \
         src/b.rs:2 names src/a.rs (super::a::A)"
    );
}

#[test]
fn parents_and_children_naming_each_other_make_no_cycle() {
    let scratch = Scratch::new("cycles-tree");
    scratch.write(
        "src/lib.rs",
        "pub mod outer;\npub use outer::inner::Deep;\npub struct Root;\n",
    );
    scratch.write(
        "src/outer/mod.rs",
        "pub mod inner;\npub mod side;\nuse self::inner::Deep;\npub use side::Side;\n\
         pub struct Outer(Deep);\n",
    );
    scratch.write(
        "src/outer/inner.rs",
        "use super::Outer;\nuse crate::Root;\npub struct Deep(super::super::Root);\n",
    );
    scratch.write(
        "src/outer/side.rs",
        "pub struct Side(crate::outer::inner::Deep);\n",
    );
    assert_eq!(cycles_of(&scratch, "src/lib.rs"), Vec::<Vec<String>>::new());
    let graph = Graph::load(&scratch.path().join("src/lib.rs")).expect("loads");
    let files: Vec<String> = graph
        .modules
        .iter()
        .map(|m| shown(&m.file, scratch.path()))
        .collect();
    assert_eq!(
        files,
        [
            "src/lib.rs",
            "src/outer/mod.rs",
            "src/outer/inner.rs",
            "src/outer/side.rs"
        ]
    );
    // Only side → inner is between modules that are not ancestor and descendant.
    let references: Vec<(usize, usize)> = graph.references.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(references, vec![(3, 2)]);
}

#[test]
fn a_reference_into_a_subtree_is_an_edge_between_the_siblings_that_hold_them() {
    let scratch = Scratch::new("cycles-lifted");
    scratch.write("src/main.rs", "mod bench;\nmod report;\nfn main() {}\n");
    scratch.write(
        "src/bench/mod.rs",
        "mod dsmem;\npub static REGISTRY: u8 = 0;\n",
    );
    scratch.write(
        "src/bench/dsmem.rs",
        "use crate::report::clusters as report_clusters;\n",
    );
    scratch.write(
        "src/report/mod.rs",
        "pub mod clusters;\nfn f() -> u8 { super::bench::REGISTRY }\n",
    );
    scratch.write("src/report/clusters.rs", "pub fn clusters() {}\n");
    assert_eq!(
        cycles_of(&scratch, "src/main.rs"),
        vec![vec![
            "src/bench/mod.rs".to_owned(),
            "src/report/mod.rs".to_owned()
        ]]
    );
}

#[test]
fn aliases_macros_and_inline_modules_are_followed_and_tests_are_not() {
    let scratch = Scratch::new("cycles-paths");
    scratch.write("src/lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n");
    // a → b through a module alias, b → a inside a macro from an inline module.
    scratch.write("src/a.rs", "use crate::b;\nfn f() { b::g(); }\n");
    scratch.write(
        "src/b.rs",
        "pub fn g() {}\nmod inner {\n    fn h() { assert!(super::super::a::X); }\n}\n",
    );
    // c → d, and d → c only in test code.
    scratch.write("src/c.rs", "pub fn c() { crate::d::d(); }\n");
    scratch.write(
        "src/d.rs",
        "pub fn d() {}\n#[cfg(test)]\nmod tests {\n    use crate::c::c;\n}\n\
         #[test]\nfn t() { crate::c::c(); }\n",
    );
    assert_eq!(
        cycles_of(&scratch, "src/lib.rs"),
        vec![vec!["src/a.rs".to_owned(), "src/b.rs".to_owned()]]
    );
}

#[test]
fn a_path_through_a_module_alias_names_the_deepest_module() {
    let scratch = Scratch::new("cycles-alias");
    scratch.write("src/lib.rs", "mod p;\nmod q;\n");
    scratch.write("src/p.rs", "use crate::q;\nfn f() {\n    q::r::g();\n}\n");
    scratch.write("src/q/mod.rs", "pub mod r;\n");
    scratch.write("src/q/r.rs", "pub fn g() {}\n");
    let graph = Graph::load(&scratch.path().join("src/lib.rs")).expect("loads");
    let named: Vec<(String, usize, String)> = graph
        .references
        .iter()
        .map(|r| {
            (
                shown(&graph.modules[r.to].file, scratch.path()),
                r.line,
                r.text.clone(),
            )
        })
        .collect();
    assert_eq!(
        named,
        vec![
            ("src/q/mod.rs".to_owned(), 1, "crate::q".to_owned()),
            ("src/q/r.rs".to_owned(), 3, "q::r::g".to_owned()),
        ]
    );
}

#[test]
fn a_missing_module_file_is_an_error() {
    let scratch = Scratch::new("cycles-missing");
    scratch.write("src/lib.rs", "mod gone;\n");
    let error = Graph::load(&scratch.path().join("src/lib.rs")).expect_err("no file");
    assert!(error.contains("module `gone`"), "{error}");
}

#[test]
fn path_attributes_and_nested_files_are_loaded() {
    let scratch = Scratch::new("cycles-path-attr");
    scratch.write("src/lib.rs", "#[path = \"other/x.rs\"]\nmod x;\nmod y;\n");
    scratch.write("src/other/x.rs", "fn f() { crate::y::z::g() }\n");
    scratch.write("src/y.rs", "pub mod z;\n");
    scratch.write("src/y/z.rs", "pub fn g() { crate::x::f() }\n");
    assert_eq!(
        cycles_of(&scratch, "src/lib.rs"),
        vec![vec!["src/other/x.rs".to_owned(), "src/y.rs".to_owned()]]
    );
}
