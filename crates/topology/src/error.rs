//! The error type of the crate.

use std::fmt;
use std::path::PathBuf;

use crate::version::SchemaVersion;

/// A file format the crate reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// JSON.
    Json,
    /// TOML.
    Toml,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Toml => "TOML",
        })
    }
}

/// One broken invariant, with the path of the offending field
/// (e.g. `elements.l2.partitions.size_each`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The dotted path of the field, indices in brackets (`notes[2].message`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

fn list(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Everything that can go wrong reading, checking or writing a topology.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text is not valid JSON or TOML.
    #[error("{format} syntax error: {message}")]
    Syntax {
        /// The format being read.
        format: Format,
        /// The parser's message (with line and column).
        message: String,
    },
    /// The document has no `schema_version`.
    #[error(
        "schema_version: missing (every topology file names its schema version, e.g. \"1.0\")"
    )]
    MissingSchemaVersion,
    /// The document's major version is not the one this reader understands.
    #[error(
        "schema_version: {found} has major version {}, this reader understands major {supported} only",
        found.major
    )]
    UnsupportedSchemaVersion {
        /// The version in the document.
        found: SchemaVersion,
        /// The major version this crate reads.
        supported: u32,
    },
    /// The document's minor version is newer than this reader's: it may hold fields this
    /// reader does not know and would drop, so it is refused rather than read in part.
    #[error(
        "schema_version: {found} is newer than {supported}, the newest this reader knows; \
         read it with a newer memtopo (a newer minor version may add fields this one would drop)"
    )]
    NewerSchemaVersion {
        /// The version in the document.
        found: SchemaVersion,
        /// The newest version this crate reads (and writes).
        supported: SchemaVersion,
    },
    /// A field is missing or has the wrong type or unit.
    #[error("{path}: {message}")]
    Field {
        /// The dotted path of the field (`.` for the document itself).
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The document is well-formed but contradicts itself.
    #[error("invalid topology: {}", list(violations))]
    Invalid {
        /// Every violation found, in document order.
        violations: Vec<Violation>,
    },
    /// Serialising failed.
    #[error("writing {format}: {message}")]
    Serialize {
        /// The format being written.
        format: Format,
        /// The serialiser's message.
        message: String,
    },
    /// The file name does not say which format it is.
    #[error("{}: cannot tell the format from the extension; use .json or .toml", path.display())]
    UnknownExtension {
        /// The file.
        path: PathBuf,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file was read but its content does not load ([`crate::Topology::load`]): the
    /// file, the position of a field of the wrong type (a syntax error's message has its
    /// own), and the error.
    #[error("{}{}: {source}", path.display(), position(*line, *column))]
    File {
        /// The file.
        path: PathBuf,
        /// The line (from 1) of the field at fault, where the parser can tell.
        line: Option<usize>,
        /// The column (from 1) on that line.
        column: Option<usize>,
        /// What is wrong.
        source: Box<Error>,
    },
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(", line {line}, column {column}"),
        (Some(line), None) => format!(", line {line}"),
        _ => String::new(),
    }
}

impl Error {
    /// The paths of the fields this error is about (empty for syntax and I/O errors).
    pub fn field_paths(&self) -> Vec<&str> {
        match self {
            Error::MissingSchemaVersion
            | Error::UnsupportedSchemaVersion { .. }
            | Error::NewerSchemaVersion { .. } => vec!["schema_version"],
            Error::File { source, .. } => source.field_paths(),
            Error::Field { path, .. } => vec![path.as_str()],
            Error::Invalid { violations } => violations.iter().map(|v| v.path.as_str()).collect(),
            _ => Vec::new(),
        }
    }

    /// The error without the file it was read from: the error inside
    /// [`Error::File`], else this one.
    pub fn without_file(&self) -> &Error {
        match self {
            Error::File { source, .. } => source.without_file(),
            other => other,
        }
    }

    /// The I/O error's kind, for errors that are one (a missing file, no permission).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self.without_file() {
            Error::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}
