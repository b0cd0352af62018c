//! Address translation: the TLB levels a global load passes before its data is looked up.
//!
//! A profile's `[tlb]` names the page size the simulated driver maps allocations with and
//! the levels, nearest first. Level 1 is private to each SM (every SM has its own copy);
//! the further levels are shared by the whole GPU. A load looks its page up level by level;
//! each level it misses adds that level's `miss_cycles` (the last level's is the page walk)
//! and fills the page into every level it missed. Each level is a set-associative (or
//! fully associative) cache of page numbers, built from the simulator's [`Cache`] with one
//! "line" per page, so its replacement is any policy the data caches have.
//!
//! Shared-memory loads and the constant bank (one 64 KiB array, always inside one page)
//! are not translated. A profile without `[tlb]` translates for free, as before schema 1.5.

use rand::rngs::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use super::cache::{Cache, Geometry};
use super::profile::{Associativity, Replacement};
use crate::error::RunnerError;

/// The simulated address translation (`[tlb]` in a profile).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbSpec {
    /// Page size of every plain allocation (`cuMemAlloc`), in bytes (a power of two,
    /// ≥ 4 KiB).
    pub page_bytes: u64,
    /// The allocation granularity of the simulated driver's virtual memory management API
    /// (schema 1.6 profiles; default 2 MiB): a walk region built of separately mapped
    /// chunks ([`crate::walk::WalkAllocation::Chunked`]) is translated with pages of
    /// `min(page_bytes, chunk_bytes)`, with the same levels and entries.
    #[serde(default = "default_chunk_bytes")]
    pub chunk_bytes: u64,
    /// Whether loads that hit an SM cache (L1, texture) are translated (schema 1.6
    /// profiles; default true). False where those caches are virtually tagged, as the
    /// H100's: its L1 path's walks never rise although the L2 path's overflow at 17 pages.
    #[serde(default = "default_true")]
    pub sm_hits_translated: bool,
    /// The levels, nearest first (`[[tlb.level]]`); level 1 per SM, the others per GPU.
    #[serde(rename = "level")]
    pub levels: Vec<TlbLevelSpec>,
}

/// One translation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbLevelSpec {
    /// Pages it holds.
    pub entries: u32,
    /// Ways per set, or `"full"`.
    pub associativity: Associativity,
    /// Replacement policy.
    pub replacement: Replacement,
    /// Cycles a load that misses this level adds (the next level, or the page walk, serves
    /// it).
    pub miss_cycles: u32,
    /// The virtual-address span one entry maps, where it is more than a page (schema 1.6
    /// profiles): an aligned range of this many bytes whose pages one entry holds, whatever
    /// the pages are (the H100's L2-path level 1: 16 MiB entries over 2 MiB pages, alike in
    /// one `cuMemAlloc` and in separately mapped chunks). Absent: one page per entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_bytes: Option<u64>,
}

impl TlbLevelSpec {
    /// The bytes one entry maps with pages of `page_bytes`.
    pub fn entry_span(&self, page_bytes: u64) -> u64 {
        self.entry_bytes.map_or(page_bytes, |e| e.max(page_bytes))
    }
}

fn default_true() -> bool {
    true
}

/// 2 MiB: the granularity of `cuMemCreate` on every GPU since Pascal.
fn default_chunk_bytes() -> u64 {
    2 << 20
}

impl TlbSpec {
    /// A translation of `page_bytes` pages through `levels`, with the default chunk.
    pub fn new(page_bytes: u64, levels: Vec<TlbLevelSpec>) -> TlbSpec {
        TlbSpec {
            page_bytes,
            chunk_bytes: default_chunk_bytes(),
            sm_hits_translated: true,
            levels,
        }
    }

    /// The page size memory allocated as `allocation` is translated with.
    pub fn page_for(&self, allocation: crate::walk::WalkAllocation) -> u64 {
        match allocation {
            crate::walk::WalkAllocation::Plain => self.page_bytes,
            crate::walk::WalkAllocation::Chunked | crate::walk::WalkAllocation::Aliased => {
                self.page_bytes.min(self.chunk_bytes)
            }
        }
    }

    /// Checks every field; `Err` names it.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] naming the bad field.
    pub fn validate(&self) -> Result<(), RunnerError> {
        let err = |m: String| Err(RunnerError::Profile(format!("tlb.{m}")));
        if !self.page_bytes.is_power_of_two() || !(4096..=1 << 31).contains(&self.page_bytes) {
            return err(format!(
                "page_bytes: {} is not a power of two from 4096 to 2^31",
                self.page_bytes
            ));
        }
        if !self.chunk_bytes.is_power_of_two() || !(4096..=1 << 30).contains(&self.chunk_bytes) {
            return err(format!(
                "chunk_bytes: {} is not a power of two from 4096 to 2^30",
                self.chunk_bytes
            ));
        }
        if self.levels.is_empty() {
            return err("level: at least one level".into());
        }
        for (i, level) in self.levels.iter().enumerate() {
            if level.entries == 0 {
                return err(format!("level[{i}].entries: must be at least 1"));
            }
            if let Associativity::Ways(ways) = level.associativity {
                if ways == 0 || level.entries % ways != 0 {
                    return err(format!(
                        "level[{i}].associativity: {ways} ways do not divide {} entries",
                        level.entries
                    ));
                }
            }
            if let Replacement::EarlyMiss { .. } = level.replacement {
                return err(format!("level[{i}].replacement: lru or random"));
            }
            if level.miss_cycles == 0 {
                return err(format!("level[{i}].miss_cycles: must be positive"));
            }
            if let Some(entry) = level.entry_bytes {
                if !entry.is_power_of_two() || !(self.page_bytes..=1 << 31).contains(&entry) {
                    return err(format!(
                        "level[{i}].entry_bytes: {entry} is not a power of two from the page ({}) to 2^31",
                        self.page_bytes
                    ));
                }
            }
            if i > 0 && level.entries <= self.levels[i - 1].entries {
                return err(format!(
                    "level[{i}].entries: must exceed the level before ({})",
                    self.levels[i - 1].entries
                ));
            }
        }
        Ok(())
    }

    /// Entries times the span of one: the bytes level `i` (from 0) maps in a plain
    /// allocation.
    pub fn reach(&self, i: usize) -> Option<u64> {
        self.levels
            .get(i)
            .map(|l| u64::from(l.entries) * l.entry_span(self.page_bytes))
    }

    fn geometry(&self, level: &TlbLevelSpec, page_bytes: u64) -> Geometry {
        // One "line" per entry; validated to be at most 2^31, so it fits in u32.
        let page = u32::try_from(level.entry_span(page_bytes)).unwrap_or(1 << 31);
        Geometry::new(
            u64::from(level.entries) * u64::from(page),
            page,
            page,
            level.associativity,
            level.replacement,
        )
    }
}

/// The TLB state of a simulated GPU: level 1 of every SM and the shared levels.
#[derive(Debug, Clone)]
pub(super) struct Tlbs {
    per_sm: Vec<Cache>,
    shared: Vec<Cache>,
    miss_cycles: Vec<u32>,
    sm_hits_translated: bool,
}

impl Tlbs {
    /// Empty TLBs of `spec` for `sm_count` SMs, translating pages of `page_bytes`.
    pub(super) fn new(spec: &TlbSpec, sm_count: usize, page_bytes: u64) -> Tlbs {
        let first = Cache::new(spec.geometry(&spec.levels[0], page_bytes));
        Tlbs {
            per_sm: vec![first; sm_count],
            shared: spec.levels[1..]
                .iter()
                .map(|l| Cache::new(spec.geometry(l, page_bytes)))
                .collect(),
            miss_cycles: spec.levels.iter().map(|l| l.miss_cycles).collect(),
            sm_hits_translated: spec.sm_hits_translated,
        }
    }

    /// Whether a load that hits an SM cache is translated ([`TlbSpec::sm_hits_translated`]).
    pub(super) fn sm_hits_translated(&self) -> bool {
        self.sm_hits_translated
    }

    /// Cycles translating `addr` on `sm` adds: the miss cycles of every level it missed.
    #[inline]
    pub(super) fn translate(&mut self, sm: usize, addr: u64, rng: &mut Xoshiro256PlusPlus) -> u32 {
        if self.per_sm[sm].access(addr, rng) {
            return 0;
        }
        let mut extra = self.miss_cycles[0];
        for (level, cache) in self.shared.iter_mut().enumerate() {
            if cache.access(addr, rng) {
                return extra;
            }
            extra += self.miss_cycles[level + 1];
        }
        extra
    }

    /// Empties every level (a launch starts with cold TLBs, as with cold caches).
    pub(super) fn reset(&mut self) {
        self.per_sm.iter_mut().for_each(Cache::reset);
        self.shared.iter_mut().for_each(Cache::reset);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn spec(levels: &[(u32, u32)]) -> TlbSpec {
        TlbSpec::new(
            2 << 20,
            levels
                .iter()
                .map(|&(entries, miss_cycles)| TlbLevelSpec {
                    entries,
                    associativity: Associativity::Full,
                    replacement: Replacement::Lru,
                    miss_cycles,
                    entry_bytes: None,
                })
                .collect(),
        )
    }

    /// Cycles of the second pass over `pages` pages, one load per page.
    fn second_pass(tlbs: &mut Tlbs, pages: u64) -> Vec<u32> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let page = 2u64 << 20;
        for p in 0..pages {
            tlbs.translate(0, p * page, &mut rng);
        }
        (0..pages)
            .map(|p| tlbs.translate(0, p * page + 64, &mut rng))
            .collect()
    }

    #[test]
    fn a_cyclic_walk_misses_every_level_it_overflows() {
        let spec = spec(&[(16, 20), (64, 100)]);
        spec.validate().unwrap();
        let mut tlbs = Tlbs::new(&spec, 2, spec.page_bytes);
        assert!(second_pass(&mut tlbs, 16).iter().all(|&c| c == 0));
        tlbs.reset();
        assert!(second_pass(&mut tlbs, 17).iter().all(|&c| c == 20));
        tlbs.reset();
        assert!(second_pass(&mut tlbs, 64).iter().all(|&c| c == 20));
        tlbs.reset();
        assert!(second_pass(&mut tlbs, 65).iter().all(|&c| c == 120));
        // Another SM has its own first level but shares the second.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        assert_eq!(tlbs.translate(1, 0, &mut rng), 120);
        assert_eq!(tlbs.translate(1, 64, &mut rng), 0);
    }

    #[test]
    fn an_entry_of_several_pages_is_hit_by_every_page_it_spans() {
        let mut spec = spec(&[(16, 10)]);
        spec.levels[0].entry_bytes = Some(16 << 20);
        spec.validate().unwrap();
        assert_eq!(spec.reach(0), Some(256 << 20));
        // 128 pages of 2 MiB are 16 entries: no miss on the second pass; 136 are 17.
        let mut tlbs = Tlbs::new(&spec, 1, 2 << 20);
        assert!(second_pass(&mut tlbs, 128).iter().all(|&c| c == 0));
        tlbs.reset();
        let cycles = second_pass(&mut tlbs, 136);
        // In address order only the first page of each 16 MiB range misses.
        assert_eq!(cycles.iter().filter(|&&c| c == 10).count(), 17);
        spec.levels[0].entry_bytes = Some(1 << 20);
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("entry_bytes"));
    }

    #[test]
    fn bad_levels_are_refused_by_name() {
        let mut bad = spec(&[(16, 20), (8, 100)]);
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("tlb.level[1].entries"), "{e}");
        bad = spec(&[(16, 0)]);
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("level[0].miss_cycles"), "{e}");
        bad = spec(&[(16, 20)]);
        bad.page_bytes = 3000;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("page_bytes"));
        bad = spec(&[(16, 20)]);
        bad.chunk_bytes = 3 << 20;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("chunk_bytes"));
        bad = spec(&[(12, 20)]);
        bad.levels[0].associativity = Associativity::Ways(5);
        assert!(bad.validate().unwrap_err().to_string().contains("5 ways"));
    }
}
