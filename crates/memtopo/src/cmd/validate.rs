//! `memtopo validate`: each result read as every load reads it (syntax, the schema's
//! version, every field's type and unit, then the physical bounds and contradictions
//! `Topology::validate` checks), one line per file, every reason listed.

use std::path::PathBuf;

use topology::Topology;

use crate::{
    error::{CliError, Exit},
    output::Stdout,
    progress::{self, Level},
};

/// One line for a valid result.
fn summary(topo: &Topology) -> String {
    let measured = topology::ElementKind::ALL
        .into_iter()
        .filter(|&kind| topo.element(kind).is_some())
        .count();
    format!(
        "valid (schema {}, {}, {measured} element(s))",
        topo.schema_version, topo.device.name
    )
}

/// Every reason `error` gives, one per entry.
fn reasons(error: &topology::Error) -> Vec<String> {
    match error.without_file() {
        topology::Error::Invalid { violations } => {
            violations.iter().map(ToString::to_string).collect()
        }
        _ => vec![super::render::reason(error)],
    }
}

/// `memtopo validate`: exit 0 when every file is valid, 11 when one is not.
pub fn validate(files: &[PathBuf]) -> Result<Exit, CliError> {
    let mut stdout = Stdout::default();
    let mut invalid = false;
    for path in files {
        let name = path.display();
        match super::render::read(path) {
            Ok(topo) => stdout.print(&format!("{name}: {}\n", summary(&topo))),
            Err(error) => {
                invalid = true;
                let reasons = reasons(&error);
                progress::say(
                    Level::Error,
                    format!("{name}: invalid ({} reason(s)):", reasons.len()),
                );
                for reason in reasons {
                    eprintln!("  {reason}");
                }
            }
        }
    }
    Ok(if invalid { Exit::Input } else { Exit::Success })
}
