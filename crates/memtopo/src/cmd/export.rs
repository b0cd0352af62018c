//! `memtopo export gpgpusim RESULT [-o FILE] [--base FILE]`: a saved result as the
//! memory-system options of a simulator's configuration (`topology::gpgpusim`).

use crate::{
    cli::{ExportArgs, ExportTarget},
    output::{self, Stdout},
    run::CliError,
};

/// `memtopo export`: exit 0, 6 when the output cannot be written, 11 when the result or
/// the base cannot be read.
pub fn export(args: &ExportArgs) -> Result<u8, CliError> {
    let topo = super::render::load(&args.input)?;
    let base = match &args.base {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| CliError::Input {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            Some(topology::gpgpusim::Base::parse(&text))
        }
        None => None,
    };
    let text = match args.target {
        ExportTarget::Gpgpusim => topology::gpgpusim::export(&topo, base.as_ref()),
    };
    match &args.output {
        Some(path) if path.as_os_str() != "-" => {
            output::write_file(path, text.as_bytes()).map_err(|e| CliError::Output {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        _ => {
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
    Ok(0)
}
