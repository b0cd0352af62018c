//! `memtopo diff`: two results compared by `topology::diff` with the tolerances of the
//! command line. Exit 0 when nothing differs beyond them, 1 when something does.

use std::path::PathBuf;

use topology::diff::{diff_with, DiffOptions};

use crate::{
    error::{CliError, Exit},
    output::Stdout,
};

/// What `diff` is asked to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The first result.
    pub before: PathBuf,
    /// The second result.
    pub after: PathBuf,
    /// The tolerances.
    pub options: DiffOptions,
    /// Notes on one side only do not count as differences.
    pub ignore_notes: bool,
}

/// `memtopo diff`.
pub fn diff(args: &Request) -> Result<Exit, CliError> {
    let before = super::render::load(&args.before)?;
    let after = super::render::load(&args.after)?;
    let options = args.options;
    let result = diff_with(&before, &after, options);
    let mut stdout = Stdout::default();
    stdout.print(&format!(
        "{} → {} (tolerances: latency {} σ and {} %, size {} %, count {})\n",
        args.before.display(),
        args.after.display(),
        options.sigmas,
        options.relative_tolerance * 100.0,
        options.size_tolerance * 100.0,
        options.count_tolerance,
    ));
    stdout.print(&result.to_string());
    if let Some(e) = stdout.error() {
        return Err(CliError::Output {
            path: "standard output".into(),
            reason: e.to_string(),
        });
    }
    let differs = !result.changes.is_empty() || (!args.ignore_notes && !result.notes.is_empty());
    Ok(if differs {
        Exit::Findings
    } else {
        Exit::Success
    })
}
