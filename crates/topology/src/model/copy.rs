//! Copies from global to shared memory (schema 1.6): per copy path (the tensor
//! memory accelerator's bulk copies, `cp.async`, the threads' plain loads) and per size, the
//! latency of one copy in flight and the bandwidth with many in flight. Paths the device
//! lacks are listed as not applicable, with the reason.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::Latency;
use crate::units::{Bytes, Cycles};

/// How data moves from global to shared memory.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CopyPathKind {
    /// Every thread loads 16 bytes (`ld.global.cg.v4`) and stores them (`st.shared.v4`).
    PlainV16,
    /// `cp.async.ca.shared.global`, 4 bytes per thread and instruction.
    #[serde(rename = "cp_async_ca_4")]
    CpAsyncCa4,
    /// `cp.async.ca.shared.global`, 8 bytes.
    #[serde(rename = "cp_async_ca_8")]
    CpAsyncCa8,
    /// `cp.async.ca.shared.global`, 16 bytes.
    #[serde(rename = "cp_async_ca_16")]
    CpAsyncCa16,
    /// `cp.async.cg.shared.global`, 16 bytes.
    #[serde(rename = "cp_async_cg_16")]
    CpAsyncCg16,
    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes` (TMA, one thread).
    Bulk,
    /// `cp.async.bulk.tensor.2d…tile.mbarrier::complete_tx::bytes` through a tensor map.
    #[serde(rename = "bulk_tensor_2d")]
    BulkTensor2d,
}

impl CopyPathKind {
    /// Every path, in report order.
    pub const ALL: [CopyPathKind; 7] = [
        CopyPathKind::PlainV16,
        CopyPathKind::CpAsyncCa4,
        CopyPathKind::CpAsyncCa8,
        CopyPathKind::CpAsyncCa16,
        CopyPathKind::CpAsyncCg16,
        CopyPathKind::Bulk,
        CopyPathKind::BulkTensor2d,
    ];

    /// The name in the file (`plain_v16`, `cp_async_ca_4`, …, `bulk_tensor_2d`).
    pub fn key(self) -> &'static str {
        match self {
            CopyPathKind::PlainV16 => "plain_v16",
            CopyPathKind::CpAsyncCa4 => "cp_async_ca_4",
            CopyPathKind::CpAsyncCa8 => "cp_async_ca_8",
            CopyPathKind::CpAsyncCa16 => "cp_async_ca_16",
            CopyPathKind::CpAsyncCg16 => "cp_async_cg_16",
            CopyPathKind::Bulk => "bulk",
            CopyPathKind::BulkTensor2d => "bulk_tensor_2d",
        }
    }

    /// A short label for tables (`plain 16B`, `cp.async.ca 4B`, `TMA bulk`, `TMA 2-D`).
    pub fn label(self) -> &'static str {
        match self {
            CopyPathKind::PlainV16 => "plain ld+st 16B",
            CopyPathKind::CpAsyncCa4 => "cp.async.ca 4B",
            CopyPathKind::CpAsyncCa8 => "cp.async.ca 8B",
            CopyPathKind::CpAsyncCa16 => "cp.async.ca 16B",
            CopyPathKind::CpAsyncCg16 => "cp.async.cg 16B",
            CopyPathKind::Bulk => "TMA bulk",
            CopyPathKind::BulkTensor2d => "TMA tensor 2-D",
        }
    }
}

/// The launch behind a bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CopyLaunch {
    /// Blocks resident on every SM.
    pub blocks_per_sm: u32,
    /// Threads per block (32 for the bulk copies: one issues).
    pub threads_per_block: u32,
    /// CopiesToShared each block has in flight per round.
    pub copies_in_flight: u32,
}

/// One copy size of one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CopyAtSize {
    /// Bytes of one copy.
    pub bytes: Bytes,
    /// The tile, `[width, height]` in 4-byte elements (the tensor form only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<[u32; 2]>,
    /// Cycles from issuing one copy (one in flight, one block on the GPU) to its completion
    /// being visible to the issuing thread, clock overhead subtracted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// The 5th percentile of the same samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_p5: Option<Cycles>,
    /// Bytes per SM cycle with many copies in flight on every SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_clock_per_sm: Option<f64>,
    /// The same over all SMs at the run's SM clock, in GB/s (10^9 bytes per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gigabytes_per_second: Option<f64>,
    /// The launch of the bandwidth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<CopyLaunch>,
}

/// One path's sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CopyPathResult {
    /// The path.
    pub path: CopyPathKind,
    /// Its sizes, ascending.
    pub sizes: Vec<CopyAtSize>,
}

/// A path the device does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CopyNotApplicable {
    /// The path.
    pub path: CopyPathKind,
    /// Why (the compute capability it needs and the device's).
    pub reason: String,
}

/// Copies from global to shared memory (schema 1.6).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CopiesToShared {
    /// Where the copies read from (e.g. "the L2: a source region of 1 MiB, read once before
    /// the timed rounds").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The paths measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<CopyPathResult>,
    /// The paths the device lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<CopyNotApplicable>,
}

impl CopiesToShared {
    /// The result of `path`, if measured.
    pub fn path(&self, path: CopyPathKind) -> Option<&CopyPathResult> {
        self.paths.iter().find(|p| p.path == path)
    }

    /// Checks that sizes are positive multiples of 16 and ascending, every bandwidth
    /// positive, `p5 ≤ p50`, a tile's area matches its bytes, and no path is both measured
    /// and not applicable. The latency itself (`p50 ≤ p95`, quartiles) is checked with every
    /// other latency of the document.
    ///
    /// ```
    /// use topology::{Bytes, CopyAtSize, CopyPathKind, CopyPathResult, CopiesToShared, Cycles};
    /// let size = |bytes| CopyAtSize {
    ///     bytes: Bytes(bytes), tile: None, latency: None, latency_p5: None,
    ///     bytes_per_clock_per_sm: Some(40.0), gigabytes_per_second: None, launch: None,
    /// };
    /// let mut c = CopiesToShared { paths: vec![CopyPathResult { path: CopyPathKind::Bulk, sizes: vec![size(128), size(256)] }], ..Default::default() };
    /// assert!(c.check().is_ok());
    /// c.paths[0].sizes[1].bytes = Bytes(100);
    /// assert!(c.check().unwrap_err().contains("multiple of 16"));
    /// ```
    ///
    /// # Errors
    /// A sentence naming the field.
    pub fn check(&self) -> Result<(), String> {
        for (i, result) in self.paths.iter().enumerate() {
            let at = format!("copies_to_shared.paths[{i}] ({})", result.path.key());
            if self.not_applicable.iter().any(|n| n.path == result.path) {
                return Err(format!("{at}: measured and also not applicable"));
            }
            let mut last = 0;
            for (j, size) in result.sizes.iter().enumerate() {
                let at = format!("{at}.sizes[{j}]");
                let bytes = size.bytes.0;
                if bytes == 0 || bytes % 16 != 0 {
                    return Err(format!(
                        "{at}.bytes: {bytes} is not a positive multiple of 16"
                    ));
                }
                if bytes <= last {
                    return Err(format!(
                        "{at}.bytes: sizes must ascend ({bytes} after {last})"
                    ));
                }
                last = bytes;
                if let Some([w, h]) = size.tile {
                    if u64::from(w) * u64::from(h) * 4 != bytes {
                        return Err(format!("{at}.tile: {w} x {h} x 4 B is not {bytes} B"));
                    }
                }
                for (name, value) in [
                    ("bytes_per_clock_per_sm", size.bytes_per_clock_per_sm),
                    ("gigabytes_per_second", size.gigabytes_per_second),
                ] {
                    if let Some(v) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                        return Err(format!("{at}.{name}: {v} is not a positive number"));
                    }
                }
                if let Some(p5) = size.latency_p5 {
                    if !(p5.0.is_finite() && p5.0 >= 0.0) {
                        return Err(format!("{at}.latency_p5: {} is not ≥ 0", p5.0));
                    }
                    match &size.latency {
                        Some(l) if p5.0 <= l.p50.0 => {}
                        Some(l) => {
                            return Err(format!(
                                "{at}.latency_p5: {} is above the median {}",
                                p5.0, l.p50.0
                            ))
                        }
                        None => return Err(format!("{at}.latency_p5 without a latency")),
                    }
                }
                if let Some(launch) = size.launch {
                    if launch.blocks_per_sm == 0
                        || launch.threads_per_block == 0
                        || launch.copies_in_flight == 0
                    {
                        return Err(format!("{at}.launch: every count must be positive"));
                    }
                }
            }
        }
        Ok(())
    }
}
