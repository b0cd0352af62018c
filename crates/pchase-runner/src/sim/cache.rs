//! One physical cache: sets of ways at line granularity, sector fills, and a replacement
//! policy.
//!
//! Under LRU (and early miss) each set keeps its valid lines in a small slice ordered from
//! most to least recently used, so LRU is a rotation of a few entries and a lookup is a
//! short linear scan; under random and tree-PLRU replacement a line stays in its way's slot
//! and tree PLRU keeps its `ways − 1` bits per set beside it. No load allocates.

use rand::rngs::Xoshiro256PlusPlus;
use rand::RngExt;

use super::profile::{Associativity, Replacement, SetIndex};

/// The shape of one cache instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Capacity in bytes.
    pub size: u64,
    /// Line size in bytes (power of two).
    pub line: u32,
    /// Sector size in bytes (power of two, ≤ line, ≤ 64 sectors per line).
    pub sector: u32,
    /// Ways per set.
    pub ways: u64,
    /// Replacement policy.
    pub replacement: Replacement,
    /// Ways of every set that other work keeps occupied (a co-tenant), unusable here.
    pub stolen_ways: u64,
    /// Which set a line goes to.
    pub index: SetIndex,
    /// Under LRU: sets per million (chosen by a fixed hash of the set number) that evict a
    /// random line instead of the least recently used one.
    pub random_sets_per_million: u32,
}

impl Geometry {
    /// The geometry of a validated cache of `size` bytes.
    pub fn new(
        size: u64,
        line: u32,
        sector: u32,
        associativity: Associativity,
        replacement: Replacement,
    ) -> Geometry {
        let ways = crate::sim::profile::ways_for(associativity, size, line);
        Geometry {
            size,
            line,
            sector,
            ways,
            replacement,
            stolen_ways: 0,
            index: SetIndex::Modulo,
            random_sets_per_million: 0,
        }
    }

    /// This geometry with a share (0 to 1) of its sets replacing at random under LRU.
    pub fn with_random_sets(mut self, share: f64) -> Geometry {
        self.random_sets_per_million = (share.clamp(0.0, 1.0) * 1e6).round() as u32;
        self
    }

    /// This geometry with lines placed in sets by `index`.
    pub fn indexed(mut self, index: SetIndex) -> Geometry {
        self.index = index;
        self
    }

    /// This geometry with `bytes` of it occupied by other work: that many bytes' worth of
    /// ways in every set (rounded up), leaving at least one way.
    pub fn stealing(mut self, bytes: u64) -> Geometry {
        let sets = (self.size / u64::from(self.line) / self.ways.max(1)).max(1);
        let per_way = sets * u64::from(self.line);
        let ways = bytes.div_ceil(per_way);
        let usable = match self.replacement {
            Replacement::EarlyMiss { reserved_ways } => self.ways - u64::from(reserved_ways),
            Replacement::Lru
            | Replacement::Random
            | Replacement::TreePlru
            | Replacement::RandomOldest { .. } => self.ways,
        };
        self.stolen_ways = ways.min(usable.saturating_sub(1));
        self
    }
}

/// A tag and the sectors of its line that are present.
#[derive(Debug, Clone, Copy)]
struct Entry {
    line: u64,
    sectors: u64,
}

/// A set-associative cache (fully associative is one set).
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    geometry: Geometry,
    line_shift: u32,
    sector_shift: u32,
    sector_index_mask: u64,
    sets: u64,
    /// `sets − 1` when the number of sets is a power of two, so the set index is a mask.
    set_mask: Option<u64>,
    /// Ways a set may fill: all of them, less the reserved ways of an early-miss policy.
    usable_ways: usize,
    /// Lines stay in their way's slot (random and tree PLRU) instead of in recency order.
    positional: bool,
    /// `log2(sets)` for an XOR-folded index (`None`: modulo).
    fold_bits: Option<u32>,
    /// Tree PLRU: each set's bits (bit `k − 1` is tree node `k`, 1 = the victim is right).
    plru: Option<Vec<u64>>,
    /// Under LRU, the sets that evict a random line instead (`None`: none do).
    random_sets: Option<Vec<bool>>,
    entries: Vec<Entry>,
    valid: Vec<u32>,
    /// Whether any access happened since the last reset (skips clearing a clean cache).
    dirty: bool,
}

impl Cache {
    /// An empty cache of the given (validated) geometry.
    pub fn new(geometry: Geometry) -> Cache {
        let lines = geometry.size / u64::from(geometry.line);
        let sets = lines / geometry.ways;
        let usable_ways = match geometry.replacement {
            Replacement::EarlyMiss { reserved_ways } => geometry.ways - u64::from(reserved_ways),
            Replacement::Lru
            | Replacement::Random
            | Replacement::TreePlru
            | Replacement::RandomOldest { .. } => geometry.ways,
        };
        let usable_ways = usize::try_from(usable_ways - geometry.stolen_ways).unwrap_or(usize::MAX);
        let set_count = usize::try_from(sets).unwrap_or(usize::MAX);
        let tree = matches!(geometry.replacement, Replacement::TreePlru);
        Cache {
            geometry,
            line_shift: geometry.line.trailing_zeros(),
            sector_shift: geometry.sector.trailing_zeros(),
            sector_index_mask: u64::from(geometry.line / geometry.sector) - 1,
            sets,
            set_mask: sets.is_power_of_two().then(|| sets - 1),
            usable_ways,
            positional: tree || matches!(geometry.replacement, Replacement::Random),
            fold_bits: (geometry.index == SetIndex::XorFold && sets > 1)
                .then(|| sets.trailing_zeros()),
            plru: tree.then(|| vec![0; set_count]),
            random_sets: (geometry.random_sets_per_million > 0
                && geometry.replacement == Replacement::Lru)
                .then(|| {
                    (0..sets)
                        .map(|set| {
                            set_mix(set) % 1_000_000 < u64::from(geometry.random_sets_per_million)
                        })
                        .collect()
                }),
            entries: vec![
                Entry {
                    line: 0,
                    sectors: 0
                };
                set_count * usable_ways
            ],
            valid: vec![0; set_count],
            dirty: false,
        }
    }

    /// The geometry this cache was built with.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Empties the cache (a cold start).
    pub fn reset(&mut self) {
        if self.dirty {
            self.valid.fill(0);
            if let Some(bits) = &mut self.plru {
                bits.fill(0);
            }
            self.dirty = false;
        }
    }

    /// Writes `bytes` bytes from byte address `addr` (within one line): the line is
    /// allocated if absent (evicting by the replacement policy), and the sectors the write
    /// covers whole become present; a partly written sector stays absent, as in an L2 that
    /// keeps per-sector valid bits and fetches a partial sector only when it is read.
    pub fn write(&mut self, addr: u64, bytes: u64, rng: &mut Xoshiro256PlusPlus) {
        let sector = u64::from(self.geometry.sector);
        let end = addr + bytes;
        let mut full = 0u64;
        let mut s = addr.div_ceil(sector) * sector;
        while s + sector <= end {
            full |= self.sector_bit(s);
            s += sector;
        }
        // Allocate the tag through a lookup, then set what the write completed and drop the
        // sector bit the lookup itself filled unless the write covered it.
        let probe_bit = self.sector_bit(addr);
        let was_present = self.access(addr, rng);
        let line = addr >> self.line_shift;
        let set = self.set_of(line);
        let base = set * self.usable_ways;
        let valid = self.valid[set] as usize;
        if let Some(entry) = self.entries[base..base + valid]
            .iter_mut()
            .find(|e| e.line == line)
        {
            if !was_present && full & probe_bit == 0 {
                entry.sectors &= !probe_bit;
            }
            entry.sectors |= full;
        }
    }

    /// The set that byte address `addr` goes to.
    pub fn set_of_address(&self, addr: u64) -> u64 {
        self.set_of(addr >> self.line_shift) as u64
    }

    /// The set of line number `line`.
    #[inline]
    fn set_of(&self, line: u64) -> usize {
        let set = match (self.fold_bits, self.set_mask) {
            (Some(bits), Some(mask)) => {
                let (mut rest, mut set) = (line, 0);
                while rest != 0 {
                    set ^= rest & mask;
                    rest >>= bits;
                }
                set
            }
            (_, Some(mask)) => line & mask,
            (_, None) => line % self.sets,
        };
        // `set < sets`, and `sets` was allocated, so it fits in usize.
        set as usize
    }

    /// The bit of the sector holding byte address `addr` in its line's sector mask.
    #[inline]
    fn sector_bit(&self, addr: u64) -> u64 {
        1u64 << ((addr >> self.sector_shift) & self.sector_index_mask)
    }

    /// Looks up the sector holding byte address `addr`; returns whether it was present.
    /// On a miss the sector is filled (its line allocated first if absent), evicting by the
    /// replacement policy.
    #[inline]
    pub fn access(&mut self, addr: u64, rng: &mut Xoshiro256PlusPlus) -> bool {
        self.dirty = true;
        let line = addr >> self.line_shift;
        let sector_bit = self.sector_bit(addr);
        let set = self.set_of(line);
        let base = set * self.usable_ways;
        let valid = self.valid[set] as usize;
        let slots = &mut self.entries[base..base + self.usable_ways];
        if let Some(i) = slots[..valid].iter().position(|e| e.line == line) {
            let hit = slots[i].sectors & sector_bit != 0;
            slots[i].sectors |= sector_bit;
            if !self.positional {
                slots[..=i].rotate_right(1);
            }
            if let Some(bits) = &mut self.plru {
                bits[set] = plru_touch(bits[set], i, self.usable_ways);
            }
            return hit;
        }
        let fresh = Entry {
            line,
            sectors: sector_bit,
        };
        if valid < self.usable_ways {
            if self.positional {
                slots[valid] = fresh;
            } else {
                slots[..=valid].rotate_right(1);
                slots[0] = fresh;
            }
            if let Some(bits) = &mut self.plru {
                bits[set] = plru_touch(bits[set], valid, self.usable_ways);
            }
            self.valid[set] += 1;
        } else if let Some(bits) = &mut self.plru {
            let victim = plru_victim(bits[set], self.usable_ways);
            slots[victim] = fresh;
            bits[set] = plru_touch(bits[set], victim, self.usable_ways);
        } else if self.positional {
            let victim = rng.random_range(0..self.usable_ways);
            slots[victim] = fresh;
        } else if let Replacement::RandomOldest { candidates } = self.geometry.replacement {
            // Entries are in recency order: the victim is one of the last `candidates`.
            let pool = (candidates as usize).clamp(1, self.usable_ways);
            let victim = self.usable_ways - 1 - rng.random_range(0..pool);
            slots[..=victim].rotate_right(1);
            slots[0] = fresh;
        } else if self.random_sets.as_ref().is_some_and(|r| r[set]) {
            // A set that replaces at random: any entry may go.
            let victim = rng.random_range(0..self.usable_ways);
            slots[..=victim].rotate_right(1);
            slots[0] = fresh;
        } else {
            // The last entry is the least recently used: it falls off the end.
            slots.rotate_right(1);
            slots[0] = fresh;
        }
        false
    }
}

/// The SplitMix64 finaliser of a set number: which sets replace at random.
fn set_mix(set: u64) -> u64 {
    let mut x = set.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Tree-PLRU bits of a set of `ways` (a power of two) after an access to `way`: every node
/// on the way's path points to the other half.
pub(crate) fn plru_touch(mut bits: u64, way: usize, ways: usize) -> u64 {
    let (mut node, mut lo, mut span) = (1usize, 0usize, ways);
    while span > 1 {
        span /= 2;
        let right = way >= lo + span;
        let bit = 1u64 << (node - 1);
        // Point away from the half just used.
        if right {
            bits &= !bit;
            lo += span;
        } else {
            bits |= bit;
        }
        node = 2 * node + usize::from(right);
    }
    bits
}

/// The way tree-PLRU bits point to.
pub(crate) fn plru_victim(bits: u64, ways: usize) -> usize {
    let (mut node, mut lo, mut span) = (1usize, 0usize, ways);
    while span > 1 {
        span /= 2;
        let right = bits & (1u64 << (node - 1)) != 0;
        if right {
            lo += span;
        }
        node = 2 * node + usize::from(right);
    }
    lo
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(1)
    }

    /// Whether a cyclic chase over `bytes` (one load per line) hits everywhere on the
    /// second pass.
    fn holds(cache: &mut Cache, bytes: u64) -> bool {
        let mut r = rng();
        cache.reset();
        for addr in (0..bytes).step_by(128) {
            cache.access(addr, &mut r);
        }
        (0..bytes)
            .step_by(128)
            .all(|addr| cache.access(addr, &mut r))
    }

    #[test]
    fn a_co_tenant_steals_whole_ways_and_leaves_one() {
        let g = Geometry::new(8192, 128, 128, Associativity::Ways(4), Replacement::Lru);
        assert!(holds(&mut Cache::new(g), 8192));
        // 4 KiB of 8 KiB: two of four ways.
        let mut half = Cache::new(g.stealing(4096));
        assert!(holds(&mut half, 4096) && !holds(&mut half, 4096 + 128 * 16));
        // Rounded up to a whole way, and never all of them.
        assert_eq!(g.stealing(1).stolen_ways, 1);
        assert_eq!(g.stealing(1 << 30).stolen_ways, 3);
        let full = Geometry::new(4096, 128, 128, Associativity::Full, Replacement::Lru);
        assert_eq!(full.stealing(1024).stolen_ways, 8);
        assert!(holds(&mut Cache::new(full.stealing(1024)), 3072));
    }

    #[test]
    fn sector_miss_then_hit_within_one_line() {
        let g = Geometry::new(1024, 128, 32, Associativity::Ways(2), Replacement::Lru);
        let mut c = Cache::new(g);
        let mut r = rng();
        assert!(!c.access(0, &mut r));
        assert!(c.access(4, &mut r), "same sector");
        assert!(!c.access(32, &mut r), "next sector of the same line misses");
        assert!(c.access(32, &mut r));
        c.reset();
        assert!(!c.access(0, &mut r), "cold after reset");
    }

    #[test]
    fn a_write_validates_only_the_sectors_it_covers_whole() {
        let g = Geometry::new(1024, 128, 32, Associativity::Ways(2), Replacement::Lru);
        let mut c = Cache::new(g);
        let mut r = rng();
        c.write(0, 16, &mut r);
        assert!(!c.access(0, &mut r), "half a sector written: a read misses");
        c.reset();
        c.write(0, 64, &mut r);
        assert!(
            c.access(0, &mut r) && c.access(32, &mut r),
            "two whole sectors hit"
        );
        assert!(!c.access(64, &mut r), "the third sector was not written");
        c.reset();
        c.write(32, 32, &mut r);
        assert!(c.access(32, &mut r));
        assert!(
            !c.access(0, &mut r),
            "the line's tag does not make other sectors valid"
        );
    }

    #[test]
    fn lru_evicts_least_recently_used_of_a_set() {
        // 2 sets × 2 ways × 64 B lines: lines 0, 2, 4 map to set 0.
        let g = Geometry::new(256, 64, 64, Associativity::Ways(2), Replacement::Lru);
        let mut c = Cache::new(g);
        let mut r = rng();
        for addr in [0, 128] {
            assert!(!c.access(addr, &mut r));
        }
        assert!(c.access(0, &mut r)); // 0 is now most recent
        assert!(!c.access(256, &mut r)); // evicts 128
        assert!(c.access(0, &mut r));
        assert!(!c.access(128, &mut r));
    }

    #[test]
    fn random_sets_replace_at_random_the_others_by_lru() {
        // 64 sets of 4 ways, half of them random. A target, then 5 lines of its set: under
        // LRU the target always goes; in a random set it stays now and then.
        let g = Geometry::new(
            64 * 4 * 64,
            64,
            64,
            Associativity::Ways(4),
            Replacement::Lru,
        )
        .with_random_sets(0.5);
        let mut c = Cache::new(g);
        let mut r = rng();
        let random: Vec<bool> = c.random_sets.clone().unwrap();
        let share = random.iter().filter(|&&x| x).count();
        assert!((20..=44).contains(&share), "{share} of 64 sets random");
        for set in 0..64u64 {
            let stays = (0..200)
                .filter(|_| {
                    c.reset();
                    c.access(set * 64, &mut r);
                    for k in 1..=5 {
                        c.access((set + 64 * k) * 64, &mut r);
                    }
                    c.access(set * 64, &mut r)
                })
                .count();
            if random[set as usize] {
                assert!(stays > 20, "set {set}: stayed {stays} of 200");
            } else {
                assert_eq!(stays, 0, "set {set}: LRU");
            }
        }
        // None random, none kept: the plain LRU cache.
        assert!(Cache::new(g.with_random_sets(0.0)).random_sets.is_none());
    }

    #[test]
    fn tree_plru_and_lru_evict_different_lines_after_a_hit() {
        // One set of four ways: lines 0, 64, 128, 192 fill it, then a hit on 0.
        for (replacement, victim) in [(Replacement::Lru, 64), (Replacement::TreePlru, 128)] {
            let g = Geometry::new(256, 64, 64, Associativity::Ways(4), replacement);
            let mut c = Cache::new(g);
            let mut r = rng();
            for addr in [0, 64, 128, 192, 0] {
                c.access(addr, &mut r);
            }
            assert!(!c.access(256, &mut r), "a fifth line misses");
            let evicted: Vec<u64> = [0, 64, 128, 192]
                .into_iter()
                .filter(|&a| {
                    let mut probe = c.clone();
                    !probe.access(a, &mut r)
                })
                .collect();
            assert_eq!(evicted, [victim], "{replacement:?}");
        }
    }

    #[test]
    fn an_xor_folded_index_spreads_power_of_two_strides() {
        // 4 sets × 2 ways of 64 B: a stride of 4 lines is one set under modulo.
        let lines = |index| {
            let g =
                Geometry::new(512, 64, 64, Associativity::Ways(2), Replacement::Lru).indexed(index);
            let mut c = Cache::new(g);
            let mut r = rng();
            let addrs: Vec<u64> = (0..4).map(|i| i * 4 * 64).collect();
            for &a in &addrs {
                c.access(a, &mut r);
            }
            addrs.iter().filter(|&&a| c.access(a, &mut r)).count()
        };
        assert_eq!(lines(SetIndex::Modulo), 0, "four lines in one two-way set");
        assert_eq!(lines(SetIndex::XorFold), 4, "folded into four sets");
        // An aligned block of four lines still fills each set once.
        let g = Geometry::new(512, 64, 64, Associativity::Ways(2), Replacement::Lru)
            .indexed(SetIndex::XorFold);
        let c = Cache::new(g);
        let mut sets: Vec<usize> = (8..12).map(|l| c.set_of(l)).collect();
        sets.sort_unstable();
        assert_eq!(sets, [0, 1, 2, 3]);
    }

    #[test]
    fn early_miss_keeps_only_the_unreserved_ways() {
        let g = Geometry::new(
            256,
            64,
            64,
            Associativity::Full,
            Replacement::EarlyMiss { reserved_ways: 1 },
        );
        let mut c = Cache::new(g);
        let mut r = rng();
        for addr in [0, 64, 128] {
            assert!(!c.access(addr, &mut r));
        }
        assert!(c.access(0, &mut r));
        assert!(!c.access(192, &mut r)); // the fourth line evicts one of the three
        let hits = [0, 64, 128, 192]
            .iter()
            .filter(|&&a| c.access(a, &mut r))
            .count();
        // LRU over three ways: 0 hits, then 64, 128 and 192 each evict the line needed next.
        assert_eq!(hits, 1, "four lines never fit in three usable ways");
    }
}
