//! Reading and writing topologies as JSON and TOML, and the JSON Schema.
//!
//! Both formats go through one path: the text is parsed into a generic tree,
//! the `schema_version` is checked before anything else (so a file of a newer
//! major gets that error, not a confusing one about a renamed field), the tree
//! is deserialised with the path of every field tracked, and the result is
//! validated. Writing validates first, so whatever is written loads again.

use std::path::Path;

use crate::error::{Error, Format};
use crate::model::Topology;
use crate::version::SchemaVersion;

impl Topology {
    /// Reads and validates a topology from JSON.
    pub fn from_json_str(text: &str) -> Result<Topology, Error> {
        from_tree(json_tree(text)?)
    }

    /// Reads and validates a topology from TOML.
    pub fn from_toml_str(text: &str) -> Result<Topology, Error> {
        let tree: serde_json::Value = toml::from_str(text).map_err(|e| Error::Syntax {
            format: Format::Toml,
            message: excerpt(&e.to_string()),
        })?;
        from_tree(tree)
    }

    /// Validates and writes the topology as pretty-printed JSON.
    pub fn to_json_string(&self) -> Result<String, Error> {
        self.validate()?;
        pretty_json(self)
    }

    /// Validates and writes the topology as TOML.
    pub fn to_toml_string(&self) -> Result<String, Error> {
        self.validate()?;
        toml::to_string_pretty(self).map_err(|e| Error::Serialize {
            format: Format::Toml,
            message: e.to_string(),
        })
    }

    /// Reads a `.json` or `.toml` file.
    ///
    /// A file that cannot be read is [`Error::Io`]; one whose content does not load is
    /// [`Error::File`]: the file, the line and column of a field of the wrong type (a
    /// syntax error's message has its own), and the error, which names the field.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("topology-load-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let path = dir.join("broken.json");
    /// std::fs::write(&path, "{\n  \"schema_version\": \"1.0\",\n  \"device\": 7\n}\n").unwrap();
    /// let err = topology::Topology::load(&path).unwrap_err();
    /// let message = err.to_string();
    /// assert!(message.contains("broken.json, line 3, column"), "{message}");
    /// assert!(message.contains("device: invalid type"), "{message}");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Topology, Error> {
        let path = path.as_ref();
        let format = format_of(path)?;
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let loaded = match format {
            Format::Json => Topology::from_json_str(&text),
            Format::Toml => Topology::from_toml_str(&text),
        };
        loaded.map_err(|error| in_file(path, &text, format, error))
    }

    /// Writes a `.json` or `.toml` file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let text = match format_of(path)? {
            Format::Json => self.to_json_string()?,
            Format::Toml => self.to_toml_string()?,
        };
        std::fs::write(path, text).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })
    }
}

fn format_of(path: &Path) -> Result<Format, Error> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("json") => Ok(Format::Json),
        Some(ext) if ext.eq_ignore_ascii_case("toml") => Ok(Format::Toml),
        _ => Err(Error::UnknownExtension {
            path: path.to_owned(),
        }),
    }
}

fn from_tree(tree: serde_json::Value) -> Result<Topology, Error> {
    let Some(document) = tree.as_object() else {
        return Err(Error::Field {
            path: ".".into(),
            message: "expected a table/object".into(),
        });
    };
    let version = document
        .get("schema_version")
        .ok_or(Error::MissingSchemaVersion)?;
    let version: SchemaVersion = version
        .as_str()
        .ok_or_else(|| "must be a string like \"1.0\"".to_owned())
        .and_then(str::parse)
        .map_err(|message| Error::Field {
            path: "schema_version".into(),
            message,
        })?;
    check_version(version)?;
    let topology: Topology = typed(tree)?;
    topology.validate()?;
    Ok(topology)
}

/// The version rule: the current major only, and no minor newer than the current one (a
/// newer minor may add fields this reader would silently drop).
pub(crate) fn check_version(version: SchemaVersion) -> Result<(), Error> {
    if version.major != SchemaVersion::CURRENT.major {
        return Err(Error::UnsupportedSchemaVersion {
            found: version,
            supported: SchemaVersion::CURRENT.major,
        });
    }
    if version > SchemaVersion::CURRENT {
        return Err(Error::NewerSchemaVersion {
            found: version,
            supported: SchemaVersion::CURRENT,
        });
    }
    Ok(())
}

/// `error`, read from the file `path` holding `text`, as [`Error::File`]; for a field of
/// the wrong type with the line and column a direct parse of the text reports (the loader
/// reads a tree first, which has no positions; a syntax error's message has its own).
fn in_file(path: &Path, text: &str, format: Format, error: Error) -> Error {
    let position = match (&error, format) {
        (Error::Field { .. }, Format::Json) => {
            let mut parser = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize::<_, Topology>(&mut parser)
                .err()
                .map(|e| (e.inner().line(), e.inner().column()))
                .filter(|(line, _)| *line > 0)
        }
        (Error::Field { .. }, Format::Toml) => toml::from_str::<Topology>(text)
            .err()
            .and_then(|e| e.span())
            .map(|span| line_column(text, span.start)),
        _ => None,
    };
    Error::File {
        path: path.to_owned(),
        line: position.map(|(line, _)| line),
        column: position.map(|(_, column)| column),
        source: Box::new(error),
    }
}

/// The line and column (both from 1, the column in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    // A parser's span starts on a character boundary; anything else counts the whole text.
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses JSON into a tree; a syntax error is cut to what a person reads.
pub(crate) fn json_tree(text: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(text).map_err(|e| Error::Syntax {
        format: Format::Json,
        message: excerpt(&e.to_string()),
    })
}

/// Pretty-printed JSON with a final newline.
pub(crate) fn pretty_json<T: serde::Serialize>(value: &T) -> Result<String, Error> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Error::Serialize {
        format: Format::Json,
        message: e.to_string(),
    })?;
    text.push('\n');
    Ok(text)
}

/// Deserialises a tree with the path of every field tracked, so an error names it.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(tree: serde_json::Value) -> Result<T, Error> {
    serde_path_to_error::deserialize(tree).map_err(|e| Error::Field {
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

/// The JSON Schema (draft 2020-12) of the topology file format, generated from
/// the types; [`crate::schema::TOPOLOGY`] (`crates/topology/schema/topology.schema.json`,
/// copied to `docs/schema/`) is this document.
///
/// The schema checks structure, types and units; the contradictions that
/// [`Topology::validate`] finds (a line larger than its cache) are beyond it.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(Topology);
    crate::schema::pin_version(&mut schema, "schema_version", SchemaVersion::CURRENT);
    schema.insert(
        "$id".into(),
        "https://example.invalid/memtopo/topology.schema.json".into(),
    );
    schema.insert(
        "description".into(),
        format!(
            "The memory topology of one GPU, as written by memtopo (schema version {}). \
             Generated from the `topology` crate; do not edit.",
            SchemaVersion::CURRENT
        )
        .into(),
    );
    schema.to_value()
}

/// A parser's message cut to what a person reads: at most 12 lines of at most 160
/// characters each (TOML errors quote the offending line, which may be megabytes long).
pub(crate) fn excerpt(message: &str) -> String {
    const LINES: usize = 12;
    const WIDTH: usize = 160;
    let mut out: Vec<String> = message
        .lines()
        .take(LINES)
        .map(|line| {
            if line.chars().count() > WIDTH {
                let cut: String = line.chars().take(WIDTH).collect();
                format!("{cut}… ({} characters)", line.chars().count())
            } else {
                line.to_owned()
            }
        })
        .collect();
    let total = message.lines().count();
    if total > LINES {
        out.push(format!("… ({} more lines)", total - LINES));
    }
    out.join("\n")
}
