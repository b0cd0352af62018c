//! `memtopo export gpgpusim RESULT [-o FILE] [--base FILE]`: a saved result as the
//! memory-system options of a simulator's configuration (`topology::gpgpusim`).

use std::path::PathBuf;

use crate::{
    error::{CliError, Exit},
    output::{self, Stdout},
};

/// What `export` writes, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The simulator whose configuration is written.
    pub target: Target,
    /// The result (`-`: standard input).
    pub input: PathBuf,
    /// The file to write; `None`: standard output.
    pub output: Option<PathBuf>,
    /// A configuration to start from: its lines are kept, the options memtopo measures
    /// replace its own.
    pub base: Option<PathBuf>,
}

/// The simulators `export` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// GPGPU-Sim's `gpgpusim.config` (also read by Accel-Sim).
    Gpgpusim,
}

/// `memtopo export`: exit 0, 6 when the output cannot be written, 11 when the result or
/// the base cannot be read.
pub fn export(request: &Request) -> Result<Exit, CliError> {
    let topo = super::render::load(&request.input)?;
    let base = match &request.base {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| CliError::Input {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            Some(topology::gpgpusim::Base::parse(&text))
        }
        None => None,
    };
    let text = match request.target {
        Target::Gpgpusim => topology::gpgpusim::export(&topo, base.as_ref()),
    };
    match &request.output {
        Some(path) => {
            output::write_file(path, text.as_bytes()).map_err(|e| CliError::Output {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        None => {
            let mut stdout = Stdout::default();
            stdout.print(&text);
            if let Some(e) = stdout.error() {
                return Err(CliError::Output {
                    path: "standard output".into(),
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(Exit::Success)
}
