//! `memtopo merge`: results and node summaries joined into one fleet report
//! (`topology::fleet::Fleet::merge`), with every GPU outside its model's spread flagged.
//! Exit 0 when no GPU is flagged degraded (flags that say a GPU differs are shown, not
//! counted) and every GPU asked for was measured, 1 otherwise, 11 when an input cannot be
//! read, 6 when an output cannot be written.

use std::path::{Path, PathBuf};

use topology::fleet::{self, Fleet, Input, SpreadOptions};

use crate::{
    error::{CliError, Exit},
    output::{self, Stdout},
    plan::SummaryFormat,
    progress::{self, Level},
};

/// What `merge` is asked to join and write.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Results, node summaries, fleet reports, and folders of them.
    pub inputs: Vec<PathBuf>,
    /// Where the report goes (none: the table on standard output).
    pub outputs: Vec<Report>,
    /// The tolerances of the flags.
    pub options: SpreadOptions,
}

/// Where a fleet report goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The fleet document on standard output.
    Stdout,
    /// A file in a format.
    File(PathBuf, SummaryFormat),
}

/// Every `.json` file under `dir` (subfolders included), sorted.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            json_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json")
            && !path.to_string_lossy().ends_with(".mt4g.json")
        {
            out.push(path);
        }
    }
    Ok(())
}

fn input_error(path: &Path, reason: String) -> CliError {
    CliError::Input {
        path: path.display().to_string(),
        reason,
    }
}

/// Reads one input: a fleet document or a result (JSON), or a result (TOML); a file
/// without an extension by its content (JSON when it starts with `{`).
fn read(path: &Path) -> Result<Input, CliError> {
    let extension = path.extension().map(|e| e.to_ascii_lowercase());
    let json = match extension.as_ref().and_then(|e| e.to_str()) {
        Some("toml") => false,
        Some("json") => true,
        None => {
            let text =
                std::fs::read_to_string(path).map_err(|e| input_error(path, e.to_string()))?;
            text.trim_start().starts_with('{')
        }
        Some(_) => {
            return Err(input_error(
                path,
                "use .json (results, node summaries, fleet reports) or .toml (results), or a \
                 folder"
                    .into(),
            ))
        }
    };
    if !json {
        return super::render::load(path).map(Input::Result);
    }
    let text = std::fs::read_to_string(path).map_err(|e| input_error(path, e.to_string()))?;
    Input::from_json_str(&text).map_err(|e| input_error(path, super::render::reason(&e)))
}

/// The inputs, folders expanded; a missing path is an error, a file given twice (also
/// through a folder) is read once, with a warning.
fn inputs(args: &Request) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    for path in &args.inputs {
        if !path.exists() {
            return Err(input_error(path, "no such file or folder".into()));
        }
        if path.is_dir() {
            let before = files.len();
            json_files(path, &mut files).map_err(|e| input_error(path, e.to_string()))?;
            if files.len() == before {
                return Err(input_error(path, "the folder holds no .json file".into()));
            }
        } else {
            files.push(path.clone());
        }
    }
    let mut seen = Vec::new();
    let mut unique = Vec::new();
    for file in files {
        let key = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
        if seen.contains(&key) {
            progress::say(
                Level::Warning,
                format!("{} is given more than once: read once", file.display()),
            );
            continue;
        }
        seen.push(key);
        unique.push(file);
    }
    Ok(unique)
}

/// `memtopo merge`.
pub fn merge(args: &Request) -> Result<Exit, CliError> {
    let mut sources = Vec::new();
    for path in inputs(args)? {
        sources.push((path.display().to_string(), read(&path)?));
    }
    // The notes the inputs bring are theirs; what merging finds is said on stderr too.
    let brought: Vec<String> = sources
        .iter()
        .filter_map(|(_, input)| match input {
            Input::Fleet(doc) => Some(doc.notes.clone()),
            Input::Result(_) => None,
        })
        .flatten()
        .collect();
    let mut report = Fleet::merge(sources, args.options);
    for note in report.notes.iter().filter(|n| !brought.contains(n)) {
        progress::say(Level::Warning, note);
    }
    report.created_utc = crate::conditions::base_record().date_utc;
    report.tool_version = Some(env!("CARGO_PKG_VERSION").into());
    let mut stdout = Stdout::default();
    let mut failed = 0;
    for target in &args.outputs {
        let written = match target {
            Report::Stdout => report
                .to_json_string()
                .map(|text| stdout.print(&text))
                .map_err(|e| e.to_string()),
            Report::File(path, format) => {
                let text = match format {
                    SummaryFormat::Json => report.to_json_string(),
                    SummaryFormat::Markdown => Ok(fleet::markdown(&report)),
                    SummaryFormat::Html => Ok(fleet::html(&report)),
                };
                text.map_err(|e| e.to_string()).and_then(|text| {
                    output::write_file(path, text.as_bytes()).map_err(|e| e.to_string())
                })
            }
        };
        if let Err(reason) = written {
            let name = match target {
                Report::Stdout => "standard output".to_owned(),
                Report::File(path, _) => path.display().to_string(),
            };
            progress::say(Level::Error, format!("cannot write {name}: {reason}"));
            failed += 1;
        }
    }
    if args.outputs.is_empty() {
        stdout.print(&fleet::table(&report));
    }
    if let Some(e) = stdout.error() {
        return Err(CliError::Output {
            path: "standard output".into(),
            reason: e.to_string(),
        });
    }
    for flag in &report.flags {
        progress::say(
            Level::Warning,
            format!(
                "{} ({}): {}: {}",
                flag.label(),
                flag.node.as_deref().unwrap_or("-"),
                flag.path,
                flag.reason
            ),
        );
    }
    Ok(if failed > 0 {
        Exit::Output
    } else if report.degraded().next().is_some() || !report.failures.is_empty() {
        Exit::Findings
    } else {
        Exit::Success
    })
}
