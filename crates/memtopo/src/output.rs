//! Output files and the terminal: checked before measuring, written without panics.
//!
//! - [`check_output`] refuses an `-o` path whose format is unknown, whose directory is
//!   missing or not a directory, where no file can be created, or that names a read-only
//!   file, before any GPU work. It never opens the path: opening a FIFO for writing waits
//!   for its reader, and closing it again would end the reader's input.
//! - [`write_file`] writes a regular file through a temporary file in the same directory
//!   and a rename, so a full disk leaves the previous file (or none), never a truncated
//!   one; the new file keeps the permissions of the one it replaces, and a read-only file
//!   is refused, as `cp` refuses it. A path that exists and is not a regular file (a
//!   device, a FIFO) is written in place.
//! - [`Stdout`] prints the table: a closed pipe (`memtopo | head -1`) ends the printing
//!   quietly, any other error is reported once.

use std::{
    fs,
    io::{self, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
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
    /// Every format, in the order help lists them.
    pub const ALL: [Format; 8] = [
        Format::Table,
        Format::Json,
        Format::Toml,
        Format::Markdown,
        Format::Svg,
        Format::Html,
        Format::Mt4g,
        Format::Csv,
    ];

    /// The extension that names the format of a file (`None`: standard output only).
    pub fn extension(self) -> Option<&'static str> {
        match self {
            Format::Table => None,
            Format::Json => Some(".json"),
            Format::Toml => Some(".toml"),
            Format::Markdown => Some(".md"),
            Format::Svg => Some(".svg"),
            Format::Html => Some(".html"),
            Format::Mt4g => Some(".mt4g.json"),
            Format::Csv => Some(".csv"),
        }
    }

    /// Its name for `--format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Json => "json",
            Format::Toml => "toml",
            Format::Markdown => "md",
            Format::Svg => "svg",
            Format::Html => "html",
            Format::Mt4g => "mt4g",
            Format::Csv => "csv",
        }
    }

    /// What the format holds, for help.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Table => "the terminal table",
            Format::Json | Format::Toml => "the topology document",
            Format::Markdown => "the Markdown report",
            Format::Svg => "the diagram",
            Format::Html => "the self-contained HTML report",
            Format::Mt4g => "MT4G v1.x's JSON layout",
            Format::Csv => "one row per value (RFC 4180)",
        }
    }

    /// The format `path` names by its extension (the longest that matches).
    pub fn of(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?;
        Format::ALL
            .into_iter()
            .filter_map(|f| Some((f, f.extension()?)))
            .filter(|(_, ext)| name.len() > ext.len() && name.ends_with(ext))
            .max_by_key(|(_, ext)| ext.len())
            .map(|(f, _)| f)
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
/// answers for permissions, read-only file systems and ACLs alike. Its name is this
/// process' and this probe's own: the GPUs of a node, checked at once on their threads,
/// probe one folder at the same time.
fn can_create_in(dir: &Path) -> Result<(), String> {
    static PROBES: AtomicU64 = AtomicU64::new(0);
    let probe = dir.join(format!(
        ".memtopo-probe-{}-{}",
        std::process::id(),
        PROBES.fetch_add(1, Ordering::Relaxed)
    ));
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
    let extensions: Vec<&str> = Format::ALL.iter().filter_map(|f| f.extension()).collect();
    format!(
        "{}: unknown output format; use {}",
        path.display(),
        extensions.join(", ")
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
            // A device or FIFO: written in place, so this process must be allowed to write
            // it; asked without opening it.
            may_write(path).map_err(unwritable)?;
            return Ok(format);
        }
        Ok(meta) => read_only(path, &meta).map_err(unwritable)?,
        Err(_) => {}
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

/// Whether this process may write `path` (access(2) with W_OK), without opening it.
fn may_write(path: &Path) -> Result<(), String> {
    rustix::fs::access(path, rustix::fs::Access::WRITE_OK)
        .map_err(|e| io::Error::from(e).to_string())
}

/// Refuses an existing regular file that is read-only: one without any write permission
/// (which root could still write), or one this process may not write.
fn read_only(path: &Path, meta: &fs::Metadata) -> Result<(), String> {
    if meta.permissions().readonly() || may_write(path).is_err() {
        return Err(format!(
            "the file is read-only (mode {:o}); memtopo does not replace it: make it \
             writable (chmod u+w) or remove it",
            meta.permissions().mode() & 0o7777
        ));
    }
    Ok(())
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
    let existing = fs::metadata(path).ok();
    if let Some(meta) = &existing {
        if !meta.is_file() && !meta.is_dir() {
            // Opening a FIFO waits for its reader; the bytes then stream into it.
            let mut file = fs::OpenOptions::new().write(true).open(path)?;
            file.write_all(bytes)?;
            return file.flush();
        }
        if meta.is_file() {
            read_only(path, meta)
                .map_err(|reason| io::Error::new(io::ErrorKind::PermissionDenied, reason))?;
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
        if let Some(meta) = existing.as_ref().filter(|m| m.is_file()) {
            // The replacement keeps the replaced file's permissions.
            file.set_permissions(meta.permissions())?;
        }
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
    fn a_read_only_file_is_refused_and_a_writable_one_keeps_its_mode() {
        let dir = scratch("modes");
        let path = dir.join("x.json");
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        let refused = check_output(&path).unwrap_err();
        assert!(
            matches!(&refused, Refusal::Unwritable { reason, .. } if reason.contains("read-only")),
            "{refused:?}"
        );
        let err = write_file(&path, b"new").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&path, b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
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
