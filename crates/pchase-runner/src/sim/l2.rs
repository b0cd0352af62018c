//! The L2 of the simulated GPU: its partitions, which of them is a line's home
//! ([`L2Interleave`]), the address a partition's cache looks a line up by, and the address
//! the near partition keeps a copy of a far line under.

use super::*;

/// Above every address a partition looks a line up by with the masked interleave: the
/// near partition's copies of far lines carry it, so their tags never meet its own lines'.
/// A placed line number drops one bit of the line number, so a placed address is below
/// 2^63.
const MASKED_COPY_MARKER: u64 = 1 << 63;

/// How lines get their home partition and their place in it, from [`L2Interleave`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Homing {
    /// A hash of the line number; a partition looks the line up by its address.
    Hash,
    /// One line of each aligned group of `partitions` lines in every partition, placed by
    /// the group number.
    Balanced {
        /// The sets of one partition.
        sets: u64,
    },
    /// The parity of the line-number bits `mask`, XOR a hash bit of the page number (the
    /// line number shifted right by `page_shift`); placed by the line number without bit
    /// `low`, the lowest bit of `mask`.
    Masked {
        /// The home bits as bits of the line number.
        mask: u64,
        /// log2 of the page's lines.
        page_shift: u32,
        /// The lowest bit of `mask`: flipping it flips the home.
        low: u32,
        /// The sets of one partition.
        sets: u64,
        /// The step of the copies' permutation of each block of `sets` placed numbers:
        /// coprime to `sets`, about 0.618 of it.
        step: u64,
        /// With the page-hash set index ([`L2SetIndex::PageHash`]): the placed numbers of
        /// one page (a power of two), whose position in the page is XORed with a hash of
        /// the page before the modulo; `None` for the plain modulo.
        page_hash: Option<u64>,
    },
}

impl Homing {
    /// The homing of a validated L2 whose partitions each have `geometry`.
    fn new(spec: &L2Spec, geometry: Geometry) -> Homing {
        let line_shift = spec.line_bytes.trailing_zeros();
        let sets = (geometry.size / u64::from(geometry.line) / geometry.ways.max(1)).max(1);
        match spec.interleave {
            L2Interleave::Hash => Homing::Hash,
            L2Interleave::Balanced => Homing::Balanced { sets },
            L2Interleave::Masked => {
                // Validation keeps every bit at or above the line shift and below the page.
                let mask = spec
                    .home_bits
                    .iter()
                    .fold(0u64, |m, &b| m | 1u64 << b.saturating_sub(line_shift));
                let page = spec.home_page_bytes.unwrap_or(0);
                let page_shift = page.trailing_zeros().saturating_sub(line_shift);
                Homing::Masked {
                    mask,
                    page_shift,
                    low: mask.trailing_zeros(),
                    sets,
                    step: coprime_step(sets),
                    // A page's lines share one home bit of the page and split by the mask's
                    // lowest bit: half of them, one placed number each, in each partition.
                    page_hash: (spec.set_index == L2SetIndex::PageHash)
                        .then(|| 1u64 << page_shift.saturating_sub(1)),
                }
            }
        }
    }
}

/// The L2 partitions and how one SM reaches them.
#[derive(Debug, Clone)]
pub(super) struct L2 {
    pub(super) partitions: Vec<Cache>,
    pub(super) line_shift: u32,
    pub(super) near_latency: u32,
    pub(super) far_latency: u32,
    pub(super) near_keeps_far_copies: bool,
    pub(super) homing: Homing,
}

impl L2 {
    /// The empty L2 of a validated profile.
    pub(super) fn new(spec: &L2Spec) -> L2 {
        let geometry = l2_partition_geometry(spec);
        L2 {
            partitions: (0..spec.partitions).map(|_| Cache::new(geometry)).collect(),
            line_shift: spec.line_bytes.trailing_zeros(),
            near_latency: spec.near_latency,
            far_latency: spec.far(),
            near_keeps_far_copies: spec.near_keeps_far_copies,
            homing: Homing::new(spec, geometry),
        }
    }

    /// The address the near partition keeps a copy of the far line at `addr` under, given
    /// the address its home partition looks it up by (`placed`). With the hash interleave,
    /// the line's own address. With the balanced interleave, the copies of one group's
    /// lines go to different sets (the line number in the set bits) and a marker above
    /// every home address keeps their tags apart (placing them by group put a group's lines
    /// in one set, and evicting it took all of them: the line probe read four lines as
    /// one).
    ///
    /// With the masked interleave, the placed line number (the two lines that share one
    /// are homed apart, so a partition copies one of them at most) permuted within its
    /// block of `sets` consecutive numbers by `at × step + hash(block)` modulo the sets, under
    /// [`MASKED_COPY_MARKER`]. Copies then fill the sets evenly block by block, but the
    /// blocks an array begins and ends in fill a scattered part of them: an SM's array
    /// overflows its near partition from a little before the partition's size, as on the
    /// H200 (the simulated and the real one: near hits keep their full share up to
    /// 25.2 MiB, fall to half at 30 MiB and below a tenth by 35.7 MiB). Placed by the
    /// placed number itself, copies filled the sets exactly and overflowed them one run
    /// of sets after another (near hits to half only at 31.9 MiB, past the partition);
    /// placed by the line number, they followed the home bits (the sampled share of near
    /// hits rose and fell with the size); scattered by a hash of the line number, they
    /// filled sets as unevenly as random placement (full share only to 17.8 MiB, half at
    /// 29.2 MiB, a tenth by 42.4 MiB).
    #[inline]
    fn copy_address(&self, addr: u64, placed: u64) -> u64 {
        match self.homing {
            Homing::Hash => addr,
            Homing::Balanced { sets } => {
                let marker = (self.partitions.len() as u64 * (sets << 32)) << self.line_shift;
                addr + marker
            }
            Homing::Masked {
                sets,
                step,
                page_hash,
                ..
            } => {
                // The copy stays in its block, below 2^63 like the placed address (the
                // simulator's addresses lie far below the last block). Copies are placed
                // by the number before the page hash, which is its own inverse.
                let placed_line = page_hashed(placed >> self.line_shift, page_hash);
                let (block, at) = (placed_line / sets, placed_line % sets);
                let set = (u128::from(at) * u128::from(step) + u128::from(mix64(block) % sets))
                    % u128::from(sets);
                let line = block * sets + set as u64;
                let offset = addr & ((1u64 << self.line_shift) - 1);
                MASKED_COPY_MARKER | (line << self.line_shift) | offset
            }
        }
    }

    /// The home partition of the line at `addr`, and the address a partition's cache
    /// looks it up by: the same address with the hash interleave; with the balanced one,
    /// the group number in the set bits and the position in the group far above them, so
    /// tags stay distinct; with the masked one, the line number without the lowest home
    /// bit (the two lines that differ only there have different homes, so in one partition
    /// the placed numbers are distinct, and consecutive ones, so the sets fill evenly).
    #[inline]
    fn place(&self, addr: u64) -> (usize, u64) {
        let count = self.partitions.len();
        let line = addr >> self.line_shift;
        let offset = addr & ((1u64 << self.line_shift) - 1);
        match self.homing {
            Homing::Balanced { sets } if count > 1 => {
                let p = count as u64;
                let (group, slot) = (line / p, line % p);
                let home = ((slot + home_partition(group, count) as u64) % p) as usize;
                let placed = group + slot * (sets << 32);
                (home, (placed << self.line_shift) | offset)
            }
            Homing::Masked {
                mask,
                page_shift,
                low,
                page_hash,
                ..
            } if count > 1 => {
                let page = line.checked_shr(page_shift).unwrap_or(0);
                let home = u64::from((line & mask).count_ones() & 1) ^ (mix64(page) & 1);
                let below = line & ((1u64 << low) - 1);
                let placed = page_hashed(((line >> low >> 1) << low) | below, page_hash);
                // `home` is 0 or 1, and the masked interleave has two partitions.
                (home as usize, (placed << self.line_shift) | offset)
            }
            _ => (home_partition(line, count), addr),
        }
    }

    /// Latency of a load of `addr` from an SM whose near partition is `near`, or `None`
    /// when it misses the L2 (device memory serves it). Fills what it passes.
    #[inline]
    pub(super) fn access(
        &mut self,
        near: usize,
        addr: u64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Option<u32> {
        let count = self.partitions.len();
        if count == 1 {
            return self.partitions[0]
                .access(addr, rng)
                .then_some(self.near_latency);
        }
        let (home, placed) = self.place(addr);
        if home == near {
            return self.partitions[near]
                .access(placed, rng)
                .then_some(self.near_latency);
        }
        // The copy lookup also fills the copy on a miss, so far data the SM reuses is
        // then served near.
        let copy = self.copy_address(addr, placed);
        if self.near_keeps_far_copies && self.partitions[near].access(copy, rng) {
            return Some(self.near_latency);
        }
        self.partitions[home]
            .access(placed, rng)
            .then_some(self.far_latency)
    }

    /// The sets, as (partition, set), that a load of `addr` from an SM whose near
    /// partition is `near` looks up: its home's, and the near partition's copy's where the
    /// near partition keeps copies of far lines.
    pub(super) fn sets(&self, near: usize, addr: u64) -> [Option<(u32, u64)>; 2] {
        let set = |partition: usize, placed: u64| {
            self.partitions
                .get(partition)
                .map(|cache| (partition as u32, cache.set_of_address(placed)))
        };
        if self.partitions.len() == 1 {
            return [set(0, addr), None];
        }
        let (home, placed) = self.place(addr);
        let copy = (home != near && self.near_keeps_far_copies)
            .then(|| set(near, self.copy_address(addr, placed)))
            .flatten();
        [set(home, placed), copy]
    }

    /// Extra cycles of a load that misses the L2 when the line's home partition is not the
    /// SM's near one: the request crosses to the far partition and the data comes back the
    /// same way, as for a far hit.
    #[inline]
    pub(super) fn far_miss_extra(&self, near: usize, addr: u64) -> u32 {
        let count = self.partitions.len();
        if count == 1 || self.place(addr).0 == near {
            0
        } else {
            self.far_latency.saturating_sub(self.near_latency)
        }
    }

    /// A store of `bytes` bytes from `addr` reaches the line's home partition.
    pub(super) fn write(&mut self, addr: u64, bytes: u64, rng: &mut Xoshiro256PlusPlus) {
        let (home, addr) = match self.partitions.len() {
            1 => (0, addr),
            _ => self.place(addr),
        };
        self.partitions[home].write(addr, bytes, rng);
    }

    pub(super) fn reset(&mut self) {
        self.partitions.iter_mut().for_each(Cache::reset);
    }
}

/// The SplitMix64 finaliser: every input bit affects every output bit.
#[inline]
fn mix64(x: u64) -> u64 {
    let mut x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Mixed into the page number before the set's hash, so that the set's hash and the home's
/// bit of one page are unrelated.
const SET_HASH_SALT: u64 = 0x005e_ed0f_5e75;

/// The placed number `placed` with its position among its page's `page` placed numbers
/// XORed with a hash of the page (the page-hash set index); `placed` as it is without one.
/// Applied twice it gives `placed` back.
#[inline]
fn page_hashed(placed: u64, page: Option<u64>) -> u64 {
    match page {
        // `page` is a power of two: the hash's low bits stay inside the page.
        Some(page) => placed ^ (mix64((placed / page) ^ SET_HASH_SALT) & (page - 1)),
        None => placed,
    }
}

/// The first number from 0.618 × `sets` on that is coprime to `sets` (1 for one set): a
/// permutation's step that puts consecutive numbers far apart.
fn coprime_step(sets: u64) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut step = ((sets as f64 * 0.618) as u64).max(1);
    while gcd(step, sets) != 1 {
        step += 1;
    }
    step
}

/// The home partition of an L2 line: a hash of the line number, so that consecutive lines
/// spread over the partitions as the hardware's address hash spreads them.
#[inline]
pub(super) fn home_partition(line: u64, count: usize) -> usize {
    // `count` is a small partition count; the remainder is below it.
    (mix64(line) % count as u64) as usize
}

/// The geometry of one L2 partition of `l2`.
pub(super) fn l2_partition_geometry(l2: &L2Spec) -> Geometry {
    Geometry::new(
        l2.partition_bytes(),
        l2.line_bytes,
        l2.sector(),
        l2.associativity,
        l2.replacement,
    )
    .with_random_sets(l2.random_sets)
}

#[cfg(test)]
mod tests;
