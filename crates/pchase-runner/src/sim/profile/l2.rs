//! The profile's L2: its size, lines and policies, its partitions and how lines are
//! spread over them, and the checks of the interleave's own fields.

use serde::{Deserialize, Serialize};

use crate::error::RunnerError;

use super::{Associativity, Replacement};

/// The L2: shared by all SMs, split into partitions; one SM reaches its near partition at
/// `near_latency` and the others at `far_latency`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Spec {
    /// Total capacity in bytes (equal to `device.l2_bytes`).
    pub size_bytes: u64,
    /// Line size.
    pub line_bytes: u32,
    /// Sector (fill) size; defaults to the line size.
    #[serde(default)]
    pub sector_bytes: Option<u32>,
    /// Ways per set of each partition, or `"full"`.
    pub associativity: Associativity,
    /// Replacement policy of each partition.
    pub replacement: Replacement,
    /// Number of partitions; each holds `size_bytes / partitions`, and every line has one
    /// home partition chosen from its address (see `interleave`).
    #[serde(default = "super::one")]
    pub partitions: u32,
    /// Cycles of a hit in the SM's near partition.
    pub near_latency: u32,
    /// Cycles of a hit in another partition; defaults to `near_latency`.
    #[serde(default)]
    pub far_latency: Option<u32>,
    /// Whether the near partition also keeps a copy of every far line the SM loads (as
    /// NVIDIA describes the A100's L2), so that far data the SM reuses is then served near.
    #[serde(default)]
    pub near_keeps_far_copies: bool,
    /// How lines are spread over the partitions: `"hash"` (the default), `"balanced"` or
    /// `"masked"` (which takes `home_bits` and `home_page_bytes`).
    #[serde(default, skip_serializing_if = "L2Interleave::is_hash")]
    pub interleave: L2Interleave,
    /// With `interleave = "masked"`: the byte-address bits whose parity (XOR) is a line's
    /// home partition, before the page's bit, e.g. `[12, 13, 15, 17, 19]`; each at least
    /// log2 of the line size and below log2 of `home_page_bytes`. Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub home_bits: Vec<u32>,
    /// With `interleave = "masked"`: the bytes of the page (a power of two, e.g. 2 MiB)
    /// whose number adds one more bit to the parity, the same for all of the page's lines
    /// and pseudo-random from page to page. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_page_bytes: Option<u64>,
    /// How a partition picks a line's set: `"modulo"` (the default) or `"page-hash"` (with
    /// `interleave = "masked"`; [`L2SetIndex`]).
    #[serde(default, skip_serializing_if = "L2SetIndex::is_modulo")]
    pub set_index: L2SetIndex,
    /// The share of each partition's sets (chosen by a fixed hash of the set number) that
    /// evict a random line of the set instead of the least recently used one; 0, the
    /// default, for none. Only with `replacement = { policy = "lru" }`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub random_sets: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// How a partition of the simulated L2 picks a line's set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum L2SetIndex {
    /// The number the partition places the line by (its interleave's), modulo the sets.
    #[default]
    Modulo,
    /// With the masked interleave: the line's position among its page's lines in the
    /// partition, XOR a fixed hash of the page number, then modulo the sets. Like the
    /// line's home, its set then depends on address bits above the page that a program
    /// cannot see, and no XOR of address bits gives it; an array of whole pages still fills
    /// every set as evenly as the modulo does (within a page the hash only permutes the
    /// lines). The lines that share a set with one line are spread over every address bit,
    /// as on the H100's and H200's L2 (docs/evidence/2026-11-28-h100-h200-warm-runs-and-l2-ways/).
    PageHash,
}

impl L2SetIndex {
    fn is_modulo(&self) -> bool {
        *self == L2SetIndex::Modulo
    }

    /// The name a profile gives the index (`modulo`, `page-hash`).
    pub fn name(self) -> &'static str {
        match self {
            L2SetIndex::Modulo => "modulo",
            L2SetIndex::PageHash => "page-hash",
        }
    }
}

/// How the simulated L2 spreads lines over its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum L2Interleave {
    /// Every line's home is a hash of its line number, and a partition's set is the line
    /// number modulo its sets: partitions and their sets fill unevenly, so without copies
    /// an SM's near hits stop some way before the L2 is full.
    #[default]
    Hash,
    /// Every aligned group of `partitions` consecutive lines has one line in each partition
    /// (which one, a hash of the group), and a partition's set is the group number modulo
    /// its sets, as address-sliced hashes of real L2s keep partitions and sets even: an
    /// array fills every partition and set alike. Copies of far lines in the near partition
    /// are placed by line number (so that one group's lines do not share a set), which
    /// fills the near partition's sets less evenly: meant for L2s without copies.
    Balanced,
    /// Two partitions; a line's home is the parity of the byte-address bits
    /// [`L2Spec::home_bits`], XOR one bit per [`L2Spec::home_page_bytes`] page (a fixed
    /// hash of the page number), which is what the H200's L2 was measured to do (bits 12,
    /// 13, 15, 17 and 19, and a bit per 2 MiB page that depends on physical address bits a
    /// program cannot see). Flipping the lowest of the bits flips the home, so a partition
    /// holds exactly one line of each pair that differs only there: its set is the line
    /// number with that bit removed, modulo its sets, and an array fills both partitions
    /// and every set alike. Copies of far lines in the near partition are placed by the
    /// same number, permuted within each block of as many numbers as sets by a hash of the
    /// block: they fill the sets evenly too, except in the blocks an array begins and ends
    /// in, so an SM's array overflows its near partition from a little before its size, as
    /// on the H200.
    Masked,
}

impl L2Interleave {
    fn is_hash(&self) -> bool {
        *self == L2Interleave::Hash
    }

    /// The name a profile gives the mode (`hash`, `balanced`, `masked`).
    pub fn name(self) -> &'static str {
        match self {
            L2Interleave::Hash => "hash",
            L2Interleave::Balanced => "balanced",
            L2Interleave::Masked => "masked",
        }
    }
}

impl L2Spec {
    /// The byte-address bits whose XOR gives a line's home partition, where the interleave
    /// is such a function (`"masked"`: with the bit of the line's `home_page_bytes` page,
    /// the same for all of a page's lines); `None` otherwise.
    pub fn home_bits(&self) -> Option<&[u32]> {
        (self.interleave == L2Interleave::Masked).then_some(self.home_bits.as_slice())
    }

    /// The sector size (the line size unless set).
    pub fn sector(&self) -> u32 {
        self.sector_bytes.unwrap_or(self.line_bytes)
    }

    /// The far latency (the near one unless set).
    pub fn far(&self) -> u32 {
        self.far_latency.unwrap_or(self.near_latency)
    }

    /// Capacity of one partition.
    pub fn partition_bytes(&self) -> u64 {
        self.size_bytes / u64::from(self.partitions.max(1))
    }

    /// The ways of a partition's sets (all of its lines where it is fully associative).
    pub fn ways(&self) -> u64 {
        super::ways_for(self.associativity, self.partition_bytes(), self.line_bytes)
    }

    /// Checks `interleave` against the partitions and its own fields (the line size is
    /// checked before: a power of two).
    ///
    /// # Errors
    /// [`RunnerError::Profile`] naming the field: `random_sets` outside [0, 1] or beside a
    /// policy other than LRU; `set_index = "page-hash"` or `home_bits` or `home_page_bytes`
    /// with another mode; with `"masked"`, partitions other than 2, a missing page or one that
    /// is not a power of two, no bits, a bit below the line or not below the page, or a
    /// bit listed twice.
    pub(super) fn validate_interleave(&self) -> Result<(), RunnerError> {
        let err = |m: String| Err(RunnerError::Profile(format!("l2.{m}")));
        if !(0.0..=1.0).contains(&self.random_sets) {
            return err(format!(
                "random_sets: {} is no share of the sets (0 to 1)",
                self.random_sets
            ));
        }
        if self.random_sets > 0.0 && self.replacement != Replacement::Lru {
            return err(format!(
                "random_sets: only with replacement = {{ policy = \"lru\" }}, not {:?}",
                self.replacement
            ));
        }
        if self.set_index == L2SetIndex::PageHash && self.interleave != L2Interleave::Masked {
            return err(format!(
                "set_index: \"page-hash\" only with interleave = \"masked\", not \"{}\"",
                self.interleave.name()
            ));
        }
        if self.interleave != L2Interleave::Masked {
            if !self.home_bits.is_empty() || self.home_page_bytes.is_some() {
                return err(format!(
                    "home_bits / home_page_bytes: only with interleave = \"masked\", not \"{}\"",
                    self.interleave.name()
                ));
            }
            return Ok(());
        }
        if self.partitions != 2 {
            return err(format!(
                "interleave: \"masked\" needs exactly 2 partitions, not {}",
                self.partitions
            ));
        }
        let Some(page) = self.home_page_bytes else {
            return err("home_page_bytes: missing (interleave = \"masked\" needs it)".into());
        };
        if !page.is_power_of_two() {
            return err(format!("home_page_bytes: {page} is not a power of two"));
        }
        if self.home_bits.is_empty() {
            return err("home_bits: empty (interleave = \"masked\" needs at least one bit)".into());
        }
        let line_shift = self.line_bytes.trailing_zeros();
        let page_shift = page.trailing_zeros();
        for (i, &bit) in self.home_bits.iter().enumerate() {
            if bit < line_shift || bit >= page_shift {
                return err(format!(
                    "home_bits: bit {bit} is not between {line_shift} (the {} B line) and {} (below the {page} B page)",
                    self.line_bytes,
                    page_shift.saturating_sub(1)
                ));
            }
            if self.home_bits[..i].contains(&bit) {
                return err(format!("home_bits: bit {bit} is listed twice"));
            }
        }
        Ok(())
    }
}
