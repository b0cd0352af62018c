//! Reading back the raw size-sweep curves that `memtopo --keep-raw DIR` writes, one CSV per
//! sweep: a header `bytes,replica,smid,mean_cycles_per_load`, then one row per size and
//! replica (the SM empty where a sweep ran on one SM per launch).
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
