//! Keeps the walk-through "Adding a benchmark" of `docs/architecture.md` true: the files its
//! table lists exist and are at most six; the worked example's names appear in no other file
//! outside tests, docs and the generated PTX; every Rust name it gives is defined in the code.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// The most files outside tests, docs and generated PTX that adding a benchmark may touch.
const MOST_FILES: usize = 6;

/// The names of the worked example (`shared-banks`) as the code spells them.
const EXAMPLE_NAMES: &[&str] = &[
    "shared-banks",
    "shared_bank_conflicts",
    "SHARED_BANK_CONFLICTS",
    "SHARED_BANKS",
    "BankModel",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// The text of the section, from its heading to the next one.
fn section() -> String {
    let text =
        fs::read_to_string(workspace().join("docs/architecture.md")).expect("docs/architecture.md");
    let start = text
        .find("## Adding a benchmark")
        .expect("docs/architecture.md has a section `## Adding a benchmark`");
    let rest = &text[start + 2..];
    let end = rest.find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_owned()
}

/// The spans between backticks of `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The files in the second column of the section's table.
fn listed_files(section: &str) -> Vec<String> {
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| step") && !l.starts_with("| ---"))
        .filter_map(|l| l.split('|').nth(2))
        .flat_map(quoted)
        .map(str::to_owned)
        .collect()
}

/// Every source file of the workspace outside tests, docs, generated PTX and build output:
/// what "touching the product" means for the count.
fn product_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(
                    name.as_str(),
                    "tests" | "target" | "pytests" | "__pycache__"
                ) && !name.starts_with('.')
                {
                    walk(&path, out);
                }
            } else if [".rs", ".toml", ".py", ".sh", ".cu"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                out.push(path);
            }
        }
    }
    let root = workspace();
    let mut files = Vec::new();
    for dir in ["crates", "xtask", "examples", "benches", "scripts"] {
        walk(&root.join(dir), &mut files);
    }
    files.push(root.join("Cargo.toml"));
    // This test names the example itself.
    files.retain(|f| !f.ends_with("xtask/src/walkthrough.rs"));
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

#[test]
fn the_table_lists_at_most_six_files_and_each_exists() {
    let files = listed_files(&section());
    assert!(!files.is_empty(), "the walk-through's table lists no file");
    assert!(
        files.len() <= MOST_FILES,
        "the walk-through touches {} files: {files:?}",
        files.len()
    );
    for file in &files {
        assert!(workspace().join(file).is_file(), "{file} does not exist");
    }
}

#[test]
fn the_worked_example_lives_only_in_the_files_the_table_lists() {
    let listed = listed_files(&section());
    let mut found: Vec<String> = product_files()
        .iter()
        .filter(|f| {
            fs::read_to_string(f).is_ok_and(|text| EXAMPLE_NAMES.iter().any(|n| text.contains(n)))
        })
        .map(|f| relative(f))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "the worked example is not in the code");
    let unlisted: Vec<&String> = found.iter().filter(|f| !listed.contains(f)).collect();
    assert!(
        unlisted.is_empty(),
        "the worked example is also in {unlisted:?}, which the walk-through does not list"
    );
}

#[test]
fn every_rust_name_the_walkthrough_gives_is_defined() {
    let section = section();
    let names: Vec<&str> = quoted(&section)
        .into_iter()
        .filter(|q| {
            q.starts_with(|c: char| c.is_ascii_uppercase())
                && q.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        })
        .collect();
    assert!(names.len() >= 10, "too few names to check: {names:?}");
    let code: String = product_files()
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .filter_map(|f| fs::read_to_string(f).ok())
        .collect();
    let defines = |item: &str| {
        [
            "fn ", "struct ", "enum ", "trait ", "static ", "const ", "type ", "mod ",
        ]
        .iter()
        .any(|kind| code.contains(&format!("{kind}{item}")))
            || code.contains(&format!("    {item},"))
            || code.contains(&format!("    {item} {{"))
            || code.contains(&format!("    pub {item}:"))
    };
    for name in names {
        for item in name.split("::") {
            assert!(defines(item), "`{name}`: nothing defines `{item}`");
        }
    }
}
