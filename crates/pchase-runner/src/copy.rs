//! Copies from global to shared memory: the request a backend answers for the
//! copy benchmark, what it returns, and what the host knows without a GPU (the source's
//! layout, the word the last slot must hold, the tensor's shape).
//!
//! One launch runs `grid` blocks of one [`CopyPath`]; each block copies `depth` regions of
//! `bytes` per round into its shared memory and waits for them (`pchase_kernels::copy`
//! describes the rounds). One block with `depth` 1 gives the latency of one copy in flight;
//! many blocks with several copies each give the bandwidth.
//!
//! ```
//! use pchase_runner::copy::{CopyRequest, CopySource};
//! use pchase_kernels::copy::CopyPath;
//! let request = CopyRequest {
//!     path: CopyPath::Bulk,
//!     source: CopySource::Linear { regions: 8 },
//!     bytes: 4096,
//!     depth: 2,
//!     grid: 3,
//!     threads: 32,
//!     warmup_rounds: 4,
//!     rounds: 10,
//! };
//! request.check()?;
//! // Block 2's last round (13) copied regions (13 x 3 + 2) x 2 = 82 and 83, mod 8: 2 and 3;
//! // the last word of region 3 holds its index, (4 x 4096 - 4) / 4.
//! assert_eq!(request.expected_check_word(2), 4095);
//! assert_eq!(request.bytes_per_round(), 8192);
//! # Ok::<(), pchase_runner::RunnerError>(())
//! ```

use std::time::Duration;

use pchase_kernels::copy::{self, CopyPath, COPY_SHARED_HEADER};
use pchase_kernels::Kernel;

use crate::error::RunnerError;

/// Where a copy's regions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CopySource {
    /// `regions` consecutive regions of `bytes` in a buffer whose word `i` holds `i`.
    Linear {
        /// Regions in the buffer.
        regions: u32,
    },
    /// Tiles of a row-major 2-D tensor of `u32` (word `i` holding `i`) of
    /// `tiles_per_row × box_w` columns and `tile_rows × box_h` rows, read through a tensor
    /// map with `box_w × box_h` boxes; tile `q` is at column `(q mod tiles_per_row) × box_w`,
    /// row `(q / tiles_per_row) × box_h`.
    Tensor2d {
        /// Tiles across.
        tiles_per_row: u32,
        /// Tiles down.
        tile_rows: u32,
        /// Tile width in elements (at most 256; `4 × box_w` a multiple of 16).
        box_w: u32,
        /// Tile height in elements (at most 256).
        box_h: u32,
    },
}

impl CopySource {
    /// Regions (tiles) in the source.
    pub fn regions(&self) -> u64 {
        match *self {
            CopySource::Linear { regions } => u64::from(regions),
            CopySource::Tensor2d {
                tiles_per_row,
                tile_rows,
                ..
            } => u64::from(tiles_per_row) * u64::from(tile_rows),
        }
    }

    /// Bytes of the source buffer for regions of `bytes`.
    pub fn buffer_bytes(&self, bytes: u32) -> u64 {
        self.regions() * u64::from(bytes)
    }

    /// The `u32` index the last word of region `q` holds.
    pub fn last_word(&self, q: u64, bytes: u32) -> u64 {
        match *self {
            CopySource::Linear { .. } => (q + 1) * u64::from(bytes) / 4 - 1,
            CopySource::Tensor2d {
                tiles_per_row,
                box_w,
                box_h,
                ..
            } => {
                let width = u64::from(tiles_per_row) * u64::from(box_w);
                let x = (q % u64::from(tiles_per_row)) * u64::from(box_w);
                let y = (q / u64::from(tiles_per_row)) * u64::from(box_h);
                (y + u64::from(box_h) - 1) * width + x + u64::from(box_w) - 1
            }
        }
    }
}

/// One launch of a copy kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyRequest {
    /// How the data moves.
    pub path: CopyPath,
    /// The source: a linear buffer ([`CopyPath::Bulk`] and the thread copies) or a tensor
    /// ([`CopyPath::BulkTensor2d`]).
    pub source: CopySource,
    /// Bytes of one copy; a positive multiple of 16 (and of the thread width).
    pub bytes: u32,
    /// Copies per round and block.
    pub depth: u32,
    /// Blocks; all must be resident at once (the backend checks what it can).
    pub grid: u32,
    /// Threads per block: 32 for the bulk copies (one issues), a multiple of 32 otherwise.
    pub threads: u32,
    /// Untimed rounds first.
    pub warmup_rounds: u32,
    /// Timed rounds; at least 1.
    pub rounds: u32,
}

impl CopyRequest {
    /// The kernel this request launches (both backends ask here).
    pub fn kernel(&self) -> &'static Kernel {
        copy::kernel(self.path)
    }

    /// Dynamic shared memory per block: the header and `depth` slots.
    pub fn shared_bytes(&self) -> u64 {
        u64::from(COPY_SHARED_HEADER) + u64::from(self.depth) * copy::slot_bytes(self.bytes)
    }

    /// Bytes one block copies per round.
    pub fn bytes_per_round(&self) -> u64 {
        u64::from(self.depth) * u64::from(self.bytes)
    }

    /// Bytes the whole launch copies in its timed rounds.
    pub fn timed_bytes(&self) -> u64 {
        self.bytes_per_round() * u64::from(self.rounds) * u64::from(self.grid)
    }

    /// The first region block `block` copies in round `round`.
    pub fn first_region(&self, block: u32, round: u32) -> u64 {
        let q =
            (u64::from(round) * u64::from(self.grid) + u64::from(block)) * u64::from(self.depth);
        q % self.source.regions().max(1)
    }

    /// The word the last slot of `block` holds after the last round.
    pub fn expected_check_word(&self, block: u32) -> u64 {
        let all_rounds = self.warmup_rounds + self.rounds;
        let last_round = all_rounds - 1;
        let q = (self.first_region(block, last_round) + u64::from(self.depth) - 1)
            % self.source.regions().max(1);
        self.source.last_word(q, self.bytes)
    }

    /// Checks what every backend requires.
    ///
    /// # Errors
    /// [`RunnerError::InvalidRequest`] naming what is wrong.
    pub fn check(&self) -> Result<(), RunnerError> {
        let bad = |m: String| Err(RunnerError::InvalidRequest(m));
        let width = self.path.thread_width().unwrap_or(16);
        if self.bytes == 0 || self.bytes % 16 != 0 || self.bytes % width != 0 {
            return bad(format!(
                "a copy of {} B is not a positive multiple of 16 B",
                self.bytes
            ));
        }
        if self.depth == 0 || self.grid == 0 || self.rounds == 0 {
            return bad("a copy launch needs depth, grid and rounds of at least 1".into());
        }
        if self.threads == 0 || self.threads % 32 != 0 || self.threads > 1024 {
            return bad(format!(
                "{} threads per block is not a multiple of 32 up to 1024",
                self.threads
            ));
        }
        let regions = self.source.regions();
        if regions == 0 || regions > u64::from(u32::MAX) {
            return bad(format!("{regions} source regions"));
        }
        if self.source.buffer_bytes(self.bytes) / 4 > u64::from(u32::MAX) {
            return bad("the source holds more than 2^32 words".into());
        }
        let rounds = u64::from(self.warmup_rounds) + u64::from(self.rounds);
        if rounds * u64::from(self.grid) * u64::from(self.depth) > u64::from(u32::MAX) {
            return bad("rounds x grid x depth overflow the kernel's 32-bit region index".into());
        }
        match (self.path, self.source) {
            (CopyPath::BulkTensor2d, CopySource::Tensor2d { box_w, box_h, .. }) => {
                if !(1..=256).contains(&box_w) || !(1..=256).contains(&box_h) || box_w % 4 != 0 {
                    return bad(format!(
                        "a {box_w} x {box_h} box: each side 1 to 256 elements, the width a multiple of 4 (16 B)"
                    ));
                }
                if u64::from(box_w) * u64::from(box_h) * 4 != u64::from(self.bytes) {
                    return bad(format!(
                        "a {box_w} x {box_h} box of 4-byte elements is not {} B",
                        self.bytes
                    ));
                }
            }
            (CopyPath::BulkTensor2d, CopySource::Linear { .. }) => {
                return bad("the tensor copy needs a 2-D tensor source".into())
            }
            (_, CopySource::Tensor2d { .. }) => {
                return bad(format!("{} copies from a linear buffer", self.path))
            }
            (_, CopySource::Linear { .. }) => {}
        }
        Ok(())
    }
}

/// What one block of a copy launch reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyBlock {
    /// Its SM.
    pub sm: u32,
    /// Cycles of its timed rounds together (`%clock64`).
    pub cycles: u64,
    /// Cycles of each timed round, issue to completion.
    pub rounds: Vec<u32>,
}

/// The result of a [`CopyRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct CopyRun {
    /// Every block, in block order.
    pub blocks: Vec<CopyBlock>,
    /// Device time of the launch.
    pub gpu_time: Duration,
}

impl CopyRun {
    /// Bytes per SM cycle over the launch: on every SM, the bytes its blocks copied in
    /// their timed rounds over the longest of their intervals (the blocks of an SM run
    /// together); the mean over the SMs used.
    pub fn bytes_per_sm_cycle(&self, request: &CopyRequest) -> Option<f64> {
        let per_block = request.bytes_per_round() * u64::from(request.rounds);
        let mut by_sm: std::collections::BTreeMap<u32, (u64, u64)> = Default::default();
        for block in &self.blocks {
            let entry = by_sm.entry(block.sm).or_default();
            entry.0 += per_block;
            entry.1 = entry.1.max(block.cycles);
        }
        let rates: Vec<f64> = by_sm
            .values()
            .filter(|(_, cycles)| *cycles > 0)
            .map(|(bytes, cycles)| *bytes as f64 / *cycles as f64)
            .collect();
        (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64)
    }
}
