//! `memtopo diff`: two results compared by `topology::diff` with the tolerances of the
//! command line. Exit 0 when nothing differs beyond them, 1 when something does.

use topology::diff::diff_with;

use crate::{cli::DiffArgs, output::Stdout, run::CliError};

/// `memtopo diff`.
pub fn diff(args: &DiffArgs) -> Result<u8, CliError> {
    let before = super::render::load(&args.before)?;
    let after = super::render::load(&args.after)?;
    let options = args.tolerances.options();
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
    Ok(u8::from(differs))
}
