//! The process-words rule: the repository says what is true now, so no tracked file cites
//! an issue, a round of work, a call or a helper by number, and no stale marker waits for
//! someone to come back. A reader cannot look such a number up; history belongs in
//! `CHANGELOG.md` (exempt) and in commit messages that describe the change.
//!
//! What the rule checks, in every file `git ls-files` lists:
//!
//! - the **contents** of each text file (a file with a NUL byte in its first 8 KiB, or one
//!   that is not UTF-8, is binary and skipped), except any file named `CHANGELOG.md`:
//!   [`PROCESS`], case-insensitive: one of the words followed by a number (`issue N`,
//!   `Session N`, `calls N`, `helper #N`, `round-N` with N in digits); and the stale markers of [`MARKERS`], upper case and word-bounded (the
//!   lower-case words are code: clippy's `todo` lint, `todo!()`);
//! - the **path** of every tracked file, text or binary: [`PROCESS`] again, also where an
//!   underscore or a digit comes before the word (`gpu_session9`), and the short forms of
//!   [`SHORT`] (`h200-s9-run1`, `i13/`).
//!
//! A legitimate phrase that matches is reworded: a warp that can issue N loads (in digits)
//! "can issue two loads"; code that subtracts one from `rounds` names the total first.

use std::{collections::BTreeMap, fs, path::Path, process::Command};

use regex::Regex;

/// References to an issue, a round of work, a call or a helper by number.
pub const PROCESS: &str = r"(?i)\b(issues?|sessions?|rounds?|calls?|helpers?)[ _#-]*[0-9]+";

/// The same in a path: the word may follow an underscore or a digit (`explore_issue12`).
const PROCESS_IN_PATH: &str =
    r"(?i)(^|[^a-z])(issues?|sessions?|rounds?|calls?|helpers?)[ _#-]*[0-9]+";

/// Short forms of a round or an issue in a path: `s9` or `i13` between separators.
pub const SHORT: &str = r"(?i)(^|[^a-z0-9])[si][0-9]+([^a-z0-9]|$)";

/// Stale markers, word-bounded and upper case. (The character classes keep this file from
/// matching its own rule.)
pub const MARKERS: &str = r"\b(TO[D]O|FIX[M]E|X[X]X)\b";

/// Files whose contents may tell history.
const HISTORY: &str = "CHANGELOG.md";

/// How many leading bytes decide whether a file is binary (as git decides).
const BINARY_PROBE: usize = 8000;

/// A match of the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Workspace-relative, `/`-separated path.
    pub path: String,
    /// 1-based line of a content match; `None` for a match in the path itself.
    pub line: Option<usize>,
    /// The text that matched.
    pub text: String,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: `{}`", self.path, self.text),
            None => write!(f, "{}: `{}` in the path", self.path, self.text),
        }
    }
}

/// The compiled patterns.
#[derive(Debug)]
pub struct Rules {
    process: Regex,
    process_in_path: Regex,
    short: Regex,
    markers: Regex,
}

impl Rules {
    /// Compiles the patterns.
    pub fn new() -> Rules {
        let compile = |pattern| Regex::new(pattern).expect("the rule's patterns are valid");
        Rules {
            process: compile(PROCESS),
            process_in_path: compile(PROCESS_IN_PATH),
            short: compile(SHORT),
            markers: compile(MARKERS),
        }
    }

    /// The matches in one file's text: (1-based line, matched text), in order.
    pub fn in_text(&self, text: &str) -> Vec<(usize, String)> {
        let mut hits = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let mut found: Vec<(usize, &str)> = self
                .process
                .find_iter(line)
                .chain(self.markers.find_iter(line))
                .map(|m| (m.start(), m.as_str()))
                .collect();
            found.sort();
            hits.extend(found.into_iter().map(|(_, t)| (index + 1, t.to_owned())));
        }
        hits
    }

    /// The first match in a workspace-relative path, if any.
    pub fn in_path(&self, path: &str) -> Option<String> {
        let found = self
            .process_in_path
            .captures(path)
            .map(|c| c.get(0).expect("whole match").as_str())
            .or_else(|| self.short.find(path).map(|m| m.as_str()))?;
        Some(
            found
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_owned(),
        )
    }

    /// Every match in `files` (workspace-relative) under `workspace`: each path, then the
    /// contents of each text file that is not a history file. Listed files missing from the
    /// work tree (deleted, not yet committed) are skipped.
    ///
    /// # Errors
    /// A file that exists and cannot be read.
    pub fn check_files(&self, workspace: &Path, files: &[String]) -> Result<Vec<Hit>, String> {
        let mut hits = Vec::new();
        for path in files {
            if let Some(text) = self.in_path(path) {
                hits.push(Hit {
                    path: path.clone(),
                    line: None,
                    text,
                });
            }
            let file = workspace.join(path);
            if !file.is_file() || path.rsplit('/').next() == Some(HISTORY) {
                continue;
            }
            let bytes = fs::read(&file).map_err(|e| format!("cannot read {path}: {e}"))?;
            let Some(text) = as_text(&bytes) else {
                continue;
            };
            hits.extend(self.in_text(text).into_iter().map(|(line, text)| Hit {
                path: path.clone(),
                line: Some(line),
                text,
            }));
        }
        Ok(hits)
    }
}

impl Default for Rules {
    fn default() -> Rules {
        Rules::new()
    }
}

/// `bytes` as text, or `None` for a binary file: a NUL among the first bytes, or not UTF-8.
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// The files git tracks in `workspace`, workspace-relative.
///
/// # Errors
/// git cannot be run or fails (not a repository).
pub fn tracked_files(workspace: &Path) -> Result<Vec<String>, String> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(workspace)
        .output()
        .map_err(|e| format!("cannot run git ls-files: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git ls-files failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|_| "git ls-files listed a path that is not UTF-8".to_owned())
        .map(|list| {
            list.split('\0')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
}

/// The hits counted by the first component of their path (`docs/`, `README.md`).
fn by_folder(hits: &[Hit]) -> BTreeMap<String, (usize, usize)> {
    let mut folders: BTreeMap<String, (usize, std::collections::BTreeSet<&str>)> = BTreeMap::new();
    for hit in hits {
        let folder = match hit.path.split_once('/') {
            Some((first, _)) => format!("{first}/"),
            None => hit.path.clone(),
        };
        let entry = folders.entry(folder).or_default();
        entry.0 += 1;
        entry.1.insert(&hit.path);
    }
    folders
        .into_iter()
        .map(|(folder, (count, files))| (folder, (count, files.len())))
        .collect()
}

/// Checks the rule for the workspace (`cargo xtask words`, and first in `cargo xtask lint`).
///
/// # Errors
/// Every match, one per line as `path:line: `text``, and a count per top-level folder; or
/// git or a file that cannot be read.
pub fn check(workspace: &Path) -> Result<(), String> {
    let files = tracked_files(workspace)?;
    let hits = Rules::new().check_files(workspace, &files)?;
    if hits.is_empty() {
        eprintln!(
            "xtask: no process words or stale markers in {} tracked files",
            files.len()
        );
        return Ok(());
    }
    let mut message: Vec<String> = hits.iter().map(Hit::to_string).collect();
    let summary = by_folder(&hits)
        .into_iter()
        .map(|(folder, (count, files))| format!("{folder} {count} in {files} files"))
        .collect::<Vec<_>>()
        .join(", ");
    message.push(format!(
        "{} process words or stale markers ({summary}): say what is true now and why; history \
         goes to CHANGELOG.md",
        hits.len()
    ));
    Err(message.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // `§` stands between a word and its number in this file's source and is removed before
    // matching, so that the file passes its own rule.

    /// `text` without its stand-ins.
    fn t(text: &str) -> String {
        text.replace('§', "")
    }

    fn text_hits(text: &str) -> Vec<String> {
        Rules::new()
            .in_text(&t(text))
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    #[test]
    fn references_by_number_match_in_any_case_and_spelling() {
        for (text, expected) in [
            ("the bandwidth kernels (issue §15)", "issue §15"),
            ("issues §12 and 13", "issues §12"),
            ("Until session §10 the flush", "session §10"),
            ("SESSION§12", "SESSION§12"),
            ("(Call §07, 08)", "Call §07"),
            ("calls §23, 25", "calls §23"),
            ("helper #§3", "helper #§3"),
            ("see round-§2", "round-§2"),
            ("issue_§16.1", "issue_§16"),
            ("the issue-§12 exploration", "issue-§12"),
            ("warmup_rounds + rounds - §1", "rounds - §1"),
        ] {
            assert_eq!(text_hits(text), vec![t(expected)], "{text}");
        }
    }

    #[test]
    fn ordinary_words_do_not_match() {
        for text in [
            "let s = Session::new(backend);",
            "each warp can issue two loads",
            "mask 0x12 and 0x2b5",
            "the session measured 12 levels",
            "a call to cuMemAlloc 3 times",
            "recalls §3 of them; tissues §4",
            "issue(2) of the queue",
            "warmup_rounds + self.rounds",
            "helpers: 2",
            "clippy's todo = \"warn\" and todo!()",
            "GPU-XXXXXXXX, TODOS, FIXMES",
            "s9 and i13 are fine in text",
        ] {
            assert_eq!(text_hits(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn stale_markers_match_word_bounded() {
        let todo = ["TO", "DO"].concat();
        let fixme = ["FIX", "ME"].concat();
        let xxx = "X".repeat(3);
        let text = format!("// {todo}: registry\nok\n/* {fixme} */ and {xxx}.\n");
        assert_eq!(
            Rules::new().in_text(&text),
            vec![(1, todo.clone()), (3, fixme), (3, xxx)]
        );
        assert_eq!(text_hits(&format!("{todo}s")), Vec::<String>::new());
    }

    #[test]
    fn several_matches_on_a_line_come_in_order() {
        let todo = ["TO", "DO"].concat();
        let text = t(&format!("x\n{todo} 3: issue §4, calls §5"));
        assert_eq!(
            Rules::new().in_text(&text),
            vec![(2, todo), (2, t("issue §4")), (2, t("calls §5"))]
        );
    }

    #[test]
    fn paths_match_long_and_short_forms() {
        let rules = Rules::new();
        for (path, expected) in [
            ("scripts/gpu/session§12_final.sh", "session§12"),
            ("scripts/gpu/explore_issue§12.sh", "issue§12"),
            ("docs/results/h100/issue-§13-session§6/a", "issue-§13"),
            ("tests/data/l2-sweep-h200-s9-run1.txt", "s9"),
            ("docs/i13/run.json", "i13"),
            ("notes/S8.md", "S8"),
        ] {
            assert_eq!(rules.in_path(&t(path)), Some(t(expected)), "{path}");
        }
        for path in [
            "crates/pchase-runner/src/measure/session.rs",
            "ptx/sm_90/hopper.ptx",
            "tests/data/l2-sweep-h200-run1.txt",
            "docs/results/h200.json",
            "crates/a/src/i32x4.rs",
            "crates/a/src/ssd1.rs",
        ] {
            assert_eq!(rules.in_path(path), None, "{path}");
        }
    }

    #[test]
    fn files_are_checked_by_path_and_text_binary_and_history_skipped() {
        let scratch = crate::scratch::Scratch::new("words");
        let dated = t("session §4 said so\n");
        scratch.write("a/ok.rs", "fn main() {}\n");
        scratch.write("a/told.rs", &t("// fine\n// issue §9\n"));
        scratch.write("CHANGELOG.md", &dated);
        scratch.write("docs/CHANGELOG.md", &dated);
        let mut binary = t("x\0 issue §1").into_bytes();
        scratch.write_bytes("blob.bin", &binary);
        binary.retain(|&b| b != 0);
        binary.push(0xe9);
        scratch.write_bytes("latin1.txt", &binary);
        let run_dir = t("runs/session§9/out.txt");
        scratch.write(&run_dir, "clean\n");
        let mut files: Vec<String> = [
            "a/ok.rs",
            "a/told.rs",
            "CHANGELOG.md",
            "docs/CHANGELOG.md",
            "blob.bin",
            "latin1.txt",
            "gone.rs",
        ]
        .map(str::to_owned)
        .to_vec();
        files.push(run_dir.clone());
        let hits = Rules::new()
            .check_files(scratch.path(), &files)
            .expect("readable");
        assert_eq!(
            hits,
            vec![
                Hit {
                    path: "a/told.rs".into(),
                    line: Some(2),
                    text: t("issue §9")
                },
                Hit {
                    path: run_dir,
                    line: None,
                    text: t("session§9")
                },
            ]
        );
        assert_eq!(hits[0].to_string(), t("a/told.rs:2: `issue §9`"));
        let folders = by_folder(&hits);
        assert_eq!(folders.get("a/"), Some(&(1, 1)));
        assert_eq!(folders.get("runs/"), Some(&(1, 1)));
    }

    #[test]
    fn tracked_files_come_from_git() {
        let files = tracked_files(&crate::workspace_root()).expect("a git work tree");
        assert!(files.iter().any(|f| f == "xtask/src/words.rs"), "{files:?}");
        assert!(files.iter().all(|f| !f.starts_with("target/")));
    }
}
