//! Output files and the terminal: checked before measuring, written without panics.
//!
//! - [`check_output`] refuses an `-o` path whose format is unknown, whose directory is
//!   missing or not a directory, or where no file can be created, before any GPU work.
//! - [`write_file`] writes a regular file through a temporary file in the same directory
//!   and a rename, so a full disk leaves the previous file (or none), never a truncated
//!   one; a path that exists and is not a regular file (a device, a FIFO) is written in
//!   place.
//! - [`Stdout`] prints the table: a closed pipe (`memtopo | head -1`) ends the printing
//!   quietly, any other error is reported once.

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
};

use topology::Topology;

/// The format of an output: of an `-o` file, from its name; of standard output, from
/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The terminal table (standard output only; no extension names it).
    Table,
    /// `.json`: the topology document.
    Json,
    /// `.toml`: the topology document.
    Toml,
    /// `.md`: the Markdown report.
    Markdown,
    /// `.svg`: the diagram.
    Svg,
    /// `.mt4g.json`: MT4G's layout.
    Mt4g,
    /// `.html`: the self-contained HTML report (with the run's raw curves).
    Html,
    /// `.csv`: one row per value (`topology::quantities`), RFC 4180.
    Csv,
}

impl Format {
    /// The format `path` names by its extension.
    pub fn of(path: &Path) -> Option<Format> {
        if path.to_string_lossy().ends_with(".mt4g.json") {
            return Some(Format::Mt4g);
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => Some(Format::Json),
            Some("toml") => Some(Format::Toml),
            Some("md") => Some(Format::Markdown),
            Some("svg") => Some(Format::Svg),
            Some("html") => Some(Format::Html),
            Some("csv") => Some(Format::Csv),
            _ => None,
        }
    }
}

/// The text of `topo` in `format`.
/// The HTML report also draws `raw` (the run's curves), where given.
pub fn text(
    topo: &Topology,
    format: Format,
    raw: Option<&topology::raw::RawData>,
) -> Result<String, String> {
    Ok(match format {
        Format::Table => topology::render::table(topo),
        Format::Html => topology::render::html(topo, raw),
        Format::Mt4g => topology::mt4g::export_string(topo),
        Format::Json => topo.to_json_string().map_err(|e| e.to_string())?,
        Format::Toml => topo.to_toml_string().map_err(|e| e.to_string())?,
        Format::Markdown => topology::render::markdown(topo),
        Format::Svg => topology::render::svg(topo),
        Format::Csv => topology::quantities_csv(&topology::quantities(topo)),
    })
}

/// Why an output path is refused before measuring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The extension names no format (a usage error).
    UnknownFormat(String),
    /// The file cannot be written there (an output error).
    Unwritable {
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The directory a file at `path` goes into (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether a new file can be created in `dir`: creates and removes a probe file, which
/// answers for permissions, read-only file systems and ACLs alike.
fn can_create_in(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".memtopo-probe-{}", std::process::id()));
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot create files in {}: {e}", dir.display())),
    }
}

/// The message for a file name whose extension names no format.
pub fn unknown_format(path: &Path) -> String {
    format!(
        "{}: unknown output format; use .json, .toml, .md, .svg, .html, .csv or .mt4g.json",
        path.display()
    )
}

/// Checks one `-o` path: a known format, and a place where the file can be written.
pub fn check_output(path: &Path) -> Result<Format, Refusal> {
    let name = path.display().to_string();
    let format = Format::of(path).ok_or_else(|| Refusal::UnknownFormat(unknown_format(path)))?;
    let unwritable = |reason: String| Refusal::Unwritable {
        path: name.clone(),
        reason,
    };
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(unwritable("it is a directory".into())),
        Ok(meta) if !meta.is_file() => {
            // A device or FIFO: written in place, so it must open for writing.
            fs::OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(|e| unwritable(e.to_string()))?;
            return Ok(format);
        }
        _ => {}
    }
    let dir = parent_dir(path);
    match fs::metadata(&dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(unwritable(format!(
                "the directory {} does not exist",
                dir.display()
            )))
        }
        Err(e) => return Err(unwritable(format!("{}: {e}", dir.display()))),
        Ok(meta) if !meta.is_dir() => {
            return Err(unwritable(format!("{} is not a directory", dir.display())))
        }
        Ok(_) => {}
    }
    can_create_in(&dir).map_err(unwritable)?;
    Ok(format)
}

/// Checks `--keep-raw DIR`: creates it (and its parents) and checks files can be made there.
pub fn check_raw_dir(dir: &Path) -> Result<(), Refusal> {
    let unwritable = |reason: String| Refusal::Unwritable {
        path: dir.display().to_string(),
        reason,
    };
    fs::create_dir_all(dir).map_err(|e| unwritable(e.to_string()))?;
    can_create_in(dir).map_err(unwritable)
}

/// Writes `bytes` to `path`. A regular file (or a new one) is written to a temporary file
/// beside it and renamed over it, so a failed write leaves no truncated file; anything
/// else that exists (a device such as `/dev/full`, a FIFO) is written in place.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Ok(meta) = fs::metadata(path) {
        if !meta.is_file() && !meta.is_dir() {
            let mut file = fs::OpenOptions::new().write(true).open(path)?;
            file.write_all(bytes)?;
            return file.flush();
        }
    }
    let dir = parent_dir(path);
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let temp = dir.join(format!(
        ".{}.memtopo-{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Standard output for the table: stops quietly at a closed pipe and remembers the first
/// other error.
#[derive(Debug, Default)]
pub struct Stdout {
    closed: bool,
    error: Option<io::Error>,
}

impl Stdout {
    /// Prints `text` unless the pipe was closed or a write already failed.
    pub fn print(&mut self, text: &str) {
        if self.closed || self.error.is_some() {
            return;
        }
        let mut out = io::stdout().lock();
        let result = out.write_all(text.as_bytes()).and_then(|()| out.flush());
        match result {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                log::debug!("standard output was closed; the rest of the table is not printed");
                self.closed = true;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// The error that stopped printing, other than a closed pipe.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memtopo-out-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn formats_follow_the_extension() {
        assert_eq!(Format::of(Path::new("a.mt4g.json")), Some(Format::Mt4g));
        assert_eq!(Format::of(Path::new("a.json")), Some(Format::Json));
        assert_eq!(Format::of(Path::new("dir/a.md")), Some(Format::Markdown));
        assert_eq!(Format::of(Path::new("report.html")), Some(Format::Html));
        assert_eq!(Format::of(Path::new("a.xlsx")), None);
    }

    #[test]
    fn a_missing_directory_is_refused() {
        let dir = scratch("missing");
        let err = check_output(&dir.join("no/such/x.json")).unwrap_err();
        match err {
            Refusal::Unwritable { reason, .. } => assert!(reason.contains("does not exist")),
            other => panic!("{other:?}"),
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_as_directory_and_a_directory_as_file_are_refused() {
        let dir = scratch("notdir");
        let file = dir.join("plain");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            check_output(&file.join("x.json")),
            Err(Refusal::Unwritable { .. })
        ));
        let sub = dir.join("sub.json");
        fs::create_dir(&sub).unwrap();
        assert!(matches!(
            check_output(&sub),
            Err(Refusal::Unwritable { reason, .. }) if reason.contains("directory")
        ));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_good_path_is_accepted_and_leaves_nothing_behind() {
        let dir = scratch("good");
        assert_eq!(check_output(&dir.join("x.toml")), Ok(Format::Toml));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0, "probe removed");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn writes_replace_the_file_whole() {
        let dir = scratch("write");
        let path = dir.join("x.json");
        fs::write(&path, "old").unwrap();
        write_file(&path, b"new contents").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new contents");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_full_device_fails_the_write_without_panic() {
        if !Path::new("/dev/full").exists() {
            return; // not Linux
        }
        let err = write_file(Path::new("/dev/full"), &[b'x'; 1 << 16]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "ENOSPC: {err}");
    }
}
