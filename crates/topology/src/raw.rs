//! Reading back the raw size-sweep curves that `memtopo --keep-raw DIR` writes, one CSV per
//! sweep: a header `bytes,replica,smid,mean_cycles_per_load`, then one row per size and
//! replica (the SM empty where a sweep ran on one SM per launch). [`load_dir`] reads a
//! whole directory: every curve, and the L2 sweep's per-load samples (`l2-samples.csv`,
//! header `bytes,sample,cycles,level`) from which the HTML report draws histograms.
//!
//! ```
//! let text = "bytes,replica,smid,mean_cycles_per_load\n4096,0,12,38.7563\n4096,1,,38.7601\n";
//! let points = topology::raw::read_curve_csv(text)?;
//! assert_eq!(points.len(), 2);
//! assert_eq!((points[0].bytes, points[0].smid, points[1].smid), (4096, Some(12), None));
//! # Ok::<(), topology::raw::RawCsvError>(())
//! ```

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::validate::{MAX_BYTES, MAX_CYCLES};

/// The header of a raw curve's CSV, as the writer spells it.
pub const CURVE_CSV_HEADER: &str = "bytes,replica,smid,mean_cycles_per_load";

/// One row of a raw curve: the mean cycles per load of one replica at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawPoint {
    /// Array size, bytes.
    pub bytes: u64,
    /// Which replica (SM of one launch) at this size.
    pub replica: u32,
    /// The SM it ran on, where recorded.
    pub smid: Option<u32>,
    /// Mean cycles per load.
    pub mean_cycles: f64,
}

/// Why a raw curve file was refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RawCsvError {
    /// The file has no header line.
    #[error("empty file: a raw curve starts with the header `{CURVE_CSV_HEADER}`")]
    Empty,
    /// The first line is not the header.
    #[error("line 1: expected the header `{CURVE_CSV_HEADER}`, found `{found}`")]
    Header {
        /// The first line (an excerpt).
        found: String,
    },
    /// A row that does not parse or holds an impossible value.
    #[error("line {line}: {message}")]
    Row {
        /// 1-based line number.
        line: usize,
        /// What is wrong (quoting at most an excerpt of the row).
        message: String,
    },
    /// A file of a directory was refused.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        source: Box<RawCsvError>,
    },
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// At most 80 characters of `text`, marked where cut.
fn short(text: &str) -> String {
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text.to_owned()
    }
}

/// Parses a raw curve's CSV text.
///
/// # Errors
/// [`RawCsvError`] for a missing or wrong header, a row without four fields, a field that
/// does not parse, a size of 0 or beyond any GPU, a latency that is not finite or beyond
/// any load's, or sizes that go down.
pub fn read_curve_csv(text: &str) -> Result<Vec<RawPoint>, RawCsvError> {
    let mut lines = text.lines();
    let header = lines.next().ok_or(RawCsvError::Empty)?;
    if header.trim() != CURVE_CSV_HEADER {
        return Err(RawCsvError::Header {
            found: short(header),
        });
    }
    let mut points = Vec::new();
    for (index, row) in lines.enumerate() {
        let line = index + 2;
        if row.trim().is_empty() {
            continue;
        }
        let bad = |message: String| RawCsvError::Row { line, message };
        let fields: Vec<&str> = row.split(',').map(str::trim).collect();
        let [bytes, replica, smid, mean] = fields[..] else {
            return Err(bad(format!(
                "{} fields, expected 4: `{}`",
                fields.len(),
                short(row)
            )));
        };
        let bytes: u64 = bytes
            .parse()
            .map_err(|e| bad(format!("bytes `{}`: {e}", short(bytes))))?;
        if bytes == 0 || bytes > MAX_BYTES {
            return Err(bad(format!(
                "{bytes} B is no array size (1 B to {MAX_BYTES} B)"
            )));
        }
        let replica: u32 = replica
            .parse()
            .map_err(|e| bad(format!("replica `{}`: {e}", short(replica))))?;
        let smid = if smid.is_empty() {
            None
        } else {
            Some(
                smid.parse()
                    .map_err(|e| bad(format!("smid `{}`: {e}", short(smid))))?,
            )
        };
        let mean_cycles: f64 = mean
            .parse()
            .map_err(|e| bad(format!("mean cycles `{}`: {e}", short(mean))))?;
        if !(mean_cycles.is_finite() && (0.0..=MAX_CYCLES).contains(&mean_cycles)) {
            return Err(bad(format!(
                "{mean_cycles} cycles per load is no latency (0 to {MAX_CYCLES})"
            )));
        }
        if points.last().is_some_and(|p: &RawPoint| p.bytes > bytes) {
            return Err(bad(format!(
                "sizes must not go down: {bytes} B after a larger one"
            )));
        }
        points.push(RawPoint {
            bytes,
            replica,
            smid,
            mean_cycles,
        });
    }
    Ok(points)
}

/// Reads a raw curve's CSV file.
///
/// # Errors
/// [`RawCsvError::Io`] when the file cannot be read, else as [`read_curve_csv`].
pub fn load_curve_csv(path: impl AsRef<Path>) -> Result<Vec<RawPoint>, RawCsvError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| RawCsvError::Io {
        path: path.to_owned(),
        source,
    })?;
    read_curve_csv(&text)
}

/// One sweep's curve: its name (the CSV's file stem, e.g. `l1-size-driver_default`), its
/// points, and the sizes at which the change-point detector placed a change.
///
/// A CSV does not record the change points: [`load_dir`] leaves them empty and the HTML
/// report takes them from the topology's sizes ([`crate::render::html`]); a caller that
/// has them (the measuring binary) sets them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Curve {
    /// What was swept.
    pub name: String,
    /// The points, sizes ascending.
    pub points: Vec<RawPoint>,
    /// Sizes (bytes) of the detected changes, ascending; empty when not known.
    pub change_points: Vec<u64>,
}

/// One sampled load of the L2 sweep: the array size, its cycles, and the level it was
/// assigned to (`near hit`, `far hit`, `memory via near partition`, …), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelSample {
    /// Array size, bytes.
    pub bytes: u64,
    /// Cycles of this load, the overhead subtracted.
    pub cycles: f64,
    /// The level the load fell into; `None` between levels.
    pub level: Option<String>,
}

/// Everything a `--keep-raw` directory holds that the reports draw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawData {
    /// Every size sweep, by name.
    pub curves: Vec<Curve>,
    /// The L2 sweep's sampled loads (empty when the directory has none).
    pub level_samples: Vec<LevelSample>,
}

/// The header of the L2 sweep's samples file.
pub const SAMPLES_CSV_HEADER: &str = "bytes,sample,cycles,level";

/// Parses the L2 sweep's samples file (`l2-samples.csv`).
///
/// ```
/// let text = "bytes,sample,cycles,level\n1638400,0,283.0,near hit\n1638400,1,401.0,\n";
/// let samples = topology::raw::read_samples_csv(text)?;
/// assert_eq!(samples[0].level.as_deref(), Some("near hit"));
/// assert_eq!(samples[1].level, None);
/// # Ok::<(), topology::raw::RawCsvError>(())
/// ```
///
/// # Errors
/// As [`read_curve_csv`], for this file's header and fields.
pub fn read_samples_csv(text: &str) -> Result<Vec<LevelSample>, RawCsvError> {
    let mut lines = text.lines();
    let header = lines.next().ok_or(RawCsvError::Empty)?;
    if header.trim() != SAMPLES_CSV_HEADER {
        return Err(RawCsvError::Header {
            found: short(header),
        });
    }
    let mut samples = Vec::new();
    for (index, row) in lines.enumerate() {
        let line = index + 2;
        if row.trim().is_empty() {
            continue;
        }
        let bad = |message: String| RawCsvError::Row { line, message };
        let fields: Vec<&str> = row.splitn(4, ',').map(str::trim).collect();
        let [bytes, sample, cycles, level] = fields[..] else {
            return Err(bad(format!(
                "{} fields, expected 4: `{}`",
                fields.len(),
                short(row)
            )));
        };
        let bytes: u64 = bytes
            .parse()
            .map_err(|e| bad(format!("bytes `{}`: {e}", short(bytes))))?;
        if bytes == 0 || bytes > MAX_BYTES {
            return Err(bad(format!(
                "{bytes} B is no array size (1 B to {MAX_BYTES} B)"
            )));
        }
        sample
            .parse::<u64>()
            .map_err(|e| bad(format!("sample `{}`: {e}", short(sample))))?;
        let cycles: f64 = cycles
            .parse()
            .map_err(|e| bad(format!("cycles `{}`: {e}", short(cycles))))?;
        if !(cycles.is_finite() && (0.0..=MAX_CYCLES).contains(&cycles)) {
            return Err(bad(format!(
                "{cycles} cycles is no load latency (0 to {MAX_CYCLES})"
            )));
        }
        samples.push(LevelSample {
            bytes,
            cycles,
            level: (!level.is_empty()).then(|| short(level)),
        });
    }
    Ok(samples)
}

/// Reads a `--keep-raw` directory: every `*.csv` is a curve, except `l2-samples.csv` (the
/// L2 sweep's samples) and `l2-line.csv` (the line probe, not drawn). Curves come sorted
/// by name.
///
/// # Errors
/// [`RawCsvError::Io`] when the directory or a file cannot be read;
/// [`RawCsvError::InFile`] naming the file that does not parse.
pub fn load_dir(dir: impl AsRef<Path>) -> Result<RawData, RawCsvError> {
    let dir = dir.as_ref();
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| RawCsvError::Io { path, source }
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.extension().is_some_and(|e| e == "csv") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut data = RawData::default();
    for path in paths {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let in_file = |source| RawCsvError::InFile {
            path: path.clone(),
            source: Box::new(source),
        };
        match name.as_str() {
            "l2-line" => {}
            "l2-samples" => data.level_samples = read_samples_csv(&text).map_err(in_file)?,
            _ => data.curves.push(Curve {
                points: read_curve_csv(&text).map_err(in_file)?,
                name,
                change_points: Vec::new(),
            }),
        }
    }
    Ok(data)
}
