//! `memtopo render` and `memtopo convert`: a saved result in any format memtopo writes.
//!
//! Both read a result with the library's loader (schema and physical bounds checked) and
//! write it with the same renderers as a measurement's `-o`. `render` shows a result: the
//! table on standard output by default, any number of `-o` files; `convert` is the
//! two-argument form for one file, `convert IN OUT` = `render IN -o OUT`.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use topology::Topology;

use crate::{
    error::{CliError, Exit},
    output::{self, Format, Stdout},
    progress::{self, Level},
};

/// What `render` (and `convert`) is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The result (`-`: standard input).
    pub input: PathBuf,
    /// Where it goes, each in its format.
    pub targets: Vec<Target>,
    /// A `--keep-raw` folder of the same run, for the HTML report's curves.
    pub raw: Option<PathBuf>,
}

/// Where one rendering goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Standard output.
    Stdout(Format),
    /// A file.
    File(PathBuf, Format),
}

/// `-` names standard input or output.
pub fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads a result: a `.json` or `.toml` file, a file without an extension or `-` for
/// standard input (JSON when it starts with `{`, else TOML). Checked as on every load:
/// syntax, schema, bounds.
pub fn read(path: &Path) -> Result<Topology, topology::Error> {
    let io = |source| topology::Error::Io {
        path: path.to_owned(),
        source,
    };
    let text = if is_dash(path) {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(io)?;
        text
    } else if path.extension().is_none() {
        std::fs::read_to_string(path).map_err(io)?
    } else {
        return Topology::load(path);
    };
    if text.trim_start().starts_with('{') {
        Topology::from_json_str(&text)
    } else {
        Topology::from_toml_str(&text)
    }
}

/// [`read`], its error as the CLI's (exit 11).
pub fn load(path: &Path) -> Result<Topology, CliError> {
    read(path).map_err(|e| CliError::Input {
        path: path.display().to_string(),
        reason: reason(&e),
    })
}

/// The error without the path it may repeat.
pub fn reason(error: &topology::Error) -> String {
    match error {
        topology::Error::Io { source, .. } => source.to_string(),
        topology::Error::File {
            source,
            line: Some(line),
            column,
            ..
        } => match column {
            Some(column) => format!("line {line}, column {column}: {}", reason(source)),
            None => format!("line {line}: {}", reason(source)),
        },
        topology::Error::File { source, .. } => reason(source),
        topology::Error::UnknownExtension { .. } => {
            "cannot tell the format from the extension; use .json or .toml (a file without \
             an extension is read by its content, `-` is standard input)"
                .into()
        }
        other => other.to_string(),
    }
}

/// Writes `topo` to every target; a target that fails is reported and the others are
/// still written. Exit 0, or 6 when one failed.
fn write(topo: &Topology, targets: &[Target], raw: Option<&topology::raw::RawData>) -> Exit {
    let mut stdout = Stdout::default();
    let mut failed = false;
    for target in targets {
        let (name, format) = match target {
            Target::Stdout(format) => ("standard output".to_owned(), *format),
            Target::File(path, format) => (path.display().to_string(), *format),
        };
        let written = output::text(topo, format, raw).and_then(|text| match target {
            Target::Stdout(_) => {
                stdout.print(&text);
                stdout.error().map_or(Ok(()), |e| Err(e.to_string()))
            }
            Target::File(path, _) => {
                output::write_file(path, text.as_bytes()).map_err(|e| e.to_string())
            }
        });
        if let Err(reason) = written {
            progress::say(Level::Error, format!("cannot write {name}: {reason}"));
            failed = true;
        }
    }
    if failed {
        Exit::Output
    } else {
        Exit::Success
    }
}

/// `memtopo render` and `memtopo convert`.
pub fn render(request: &Request) -> Result<Exit, CliError> {
    let topo = load(&request.input)?;
    let raw = match &request.raw {
        Some(dir) => Some(topology::raw::load_dir(dir).map_err(|e| CliError::Input {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?),
        None => None,
    };
    Ok(write(&topo, &request.targets, raw.as_ref()))
}
