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
    cli::{ConvertArgs, RenderArgs},
    output::{self, Format, Stdout},
    progress::{self, Level},
    run::CliError,
};

/// Where one rendering goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// Standard output.
    Stdout(Format),
    /// A file.
    File(PathBuf, Format),
}

fn is_dash(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Reads a result: a `.json` or `.toml` file, or `-` for standard input (JSON when it
/// starts with `{`, else TOML). Checked as on every load: syntax, schema, bounds.
pub fn read(path: &Path) -> Result<Topology, topology::Error> {
    if !is_dash(path) {
        return Topology::load(path);
    }
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|source| topology::Error::Io {
            path: path.to_owned(),
            source,
        })?;
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
            "cannot tell the format from the extension; use .json or .toml (or `-` for \
             standard input)"
                .into()
        }
        other => other.to_string(),
    }
}

/// The format of the file `path`: `format` if given, else its extension's.
fn file_format(path: &Path, format: Option<Format>) -> Result<Format, CliError> {
    format
        .or_else(|| Format::of(path))
        .ok_or_else(|| CliError::Usage(output::unknown_format(path)))
}

/// Writes `topo` to every target; a target that fails is reported and the others are
/// still written. Exit 0, or 6 when one failed.
fn write(topo: &Topology, targets: &[Target], raw: Option<&topology::raw::RawData>) -> u8 {
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
        6
    } else {
        0
    }
}

/// `memtopo render`.
pub fn render(args: &RenderArgs) -> Result<u8, CliError> {
    if args.output.iter().filter(|p| is_dash(p)).count() > 1 {
        return Err(CliError::Usage(
            "`-o -` (standard output) may be given once".into(),
        ));
    }
    let targets = if args.output.is_empty() {
        vec![Target::Stdout(args.format.unwrap_or(Format::Table))]
    } else {
        if args.format.is_some() && !args.output.iter().any(|p| is_dash(p)) {
            return Err(CliError::Usage(
                "--format names the format of standard output: add `-o -`, or name the \
                 format of a file by its extension"
                    .into(),
            ));
        }
        args.output
            .iter()
            .map(|path| {
                Ok(if is_dash(path) {
                    Target::Stdout(args.format.unwrap_or(Format::Json))
                } else {
                    Target::File(path.clone(), file_format(path, None)?)
                })
            })
            .collect::<Result<Vec<_>, CliError>>()?
    };
    let topo = load(&args.input)?;
    let raw = match &args.raw {
        Some(dir) => Some(topology::raw::load_dir(dir).map_err(|e| CliError::Input {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?),
        None => None,
    };
    Ok(write(&topo, &targets, raw.as_ref()))
}

/// `memtopo convert`.
pub fn convert(args: &ConvertArgs) -> Result<u8, CliError> {
    let target = if is_dash(&args.output) {
        Target::Stdout(args.format.unwrap_or(Format::Json))
    } else {
        Target::File(args.output.clone(), file_format(&args.output, args.format)?)
    };
    let topo = load(&args.input)?;
    Ok(write(&topo, &[target], None))
}
