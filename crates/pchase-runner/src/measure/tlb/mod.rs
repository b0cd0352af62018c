//! The TLB search: translation levels, their reach and miss cost, and the page size, from
//! chases that touch many pages with only a few lines of data.
//!
//! A chase of `n` nodes a little more than `stride` bytes apart ([`step_bytes`]) touches one
//! line per node. With a stride of at least the page size every node lies in its own page,
//! so `n` pages are translated in turn while the data stays `n` lines (a few KiB): what
//! rises with `n` is translation. Each node's line is a few lines further into its page
//! than the last, so that the nodes spread over the cache sets and no data set overflows
//! before the data's size does; the data's size is kept below the cache ([`TlbLimits`]).
//!
//! The decisions are on the 5th percentile of each chase's per-load latencies
//! (the level every load of a cyclic walk pays once a TLB level overflows; on the L2 path
//! it is the near partition's hit, not a mixture with far hits). A *rise* is a 5th
//! percentile above the level before by more than max(4 cycles, 3 %) (an H100's L2-path
//! level costs +10 cycles over 260).
//!
//! 1. **First level.** From the largest candidate stride ([`STRIDES`], up to 1 GiB) down:
//!    walks of 1, 2, 4 and 8 nodes (the base: the lowest of their 5th percentiles, since a
//!    walk of a few lines may meet only slow L2 slices — an H100's one-line walks in 2 MiB
//!    chunks read 265 cycles against 254 for eight lines) and one at the most nodes the
//!    limits allow say whether any level overflows at this stride; where one does, double
//!    `n` from the largest base walk that did not rise until the
//!    latency rises, then bisect: the first rising `n` is entries + 1 of the first level (a
//!    cyclic walk over one page more than the level holds misses every time). A stride
//!    whose largest walk does not rise costs two walks; the next smaller stride is tried
//!    (it can touch more, smaller pages where the memory, not the node limit, stopped the
//!    walk); the page size can then be determined only below the stride that found the
//!    level.
//! 2. **Entry span.** For a stride below the span one entry maps, several nodes share an
//!    entry, so the first rising `n` is larger. The span is the smallest candidate stride
//!    whose first rising `n` equals the largest stride's (binary search over [`STRIDES`],
//!    which is monotone). Where only the stride that found the level does, the order test
//!    (3.) decides: its groups are that stride apart, so a confirmed test means no two
//!    groups shared an entry and the span is that stride; without a confirmed test it is
//!    not determined. An entry may map
//!    more than a page: the H100's L2-path level 1 maps 16 MiB per entry over 2 MiB pages,
//!    alike in one `cuMemAlloc` and in separately mapped 2 MiB chunks, so the
//!    walks measure the entry's span, not the driver's page size.
//!    **2b. Interleave.** Entries of half the span whose set index takes the address bit
//!    above them (two halves of the level by address) overflow exactly like entries of the
//!    whole span: at its stride every node lands in one half. The walk of twice the nodes at
//!    half the stride tells them apart (`interleave.rs`): where it overflows like the level
//!    and its loads are as slow as in the same lines grouped by pairs, consecutive nodes did
//!    not share an entry, so the entries are half as large, twice as many, and dealt to two
//!    halves; repeated down to the previous level's span. The H100's third L2-path
//!    level is such a level.
//! 3. **Only translation depends on the order.** The same lines are walked twice at a
//!    stride an eighth of the span ([`OrderCheck`]): in address order, where eight
//!    neighbours share an entry and at most one load in eight misses, and grouped, one
//!    node of each span-sized group in turn, where every load misses once the rising node
//!    count of groups is walked. Translation rises in the grouped walk only; a data effect
//!    (the same lines, so the same cache behaviour) rises in both or neither. A rise the
//!    order does not confirm is not a level ([`RejectedRise`]; on the H100's L2 path walks
//!    of 2207+ nodes 32 MiB apart rise to the far partition's hit, 16 MiB ones do not): it
//!    is recorded, no level is reported from it, and the search goes on at the next
//!    smaller stride as if that stride's walk had not risen. Where the grouped walk does
//!    not fit the limits, a rise counts if a smaller stride repeats it or it was found at
//!    the largest stride tried. [`TlbFinding::flat`] keeps the largest walk without a rise
//!    per stride, the honest bound where no level is found.
//! 4. **Further levels.** Each is searched like the first, over the strides from the
//!    largest down to the previous level's span, from the previous level's overflow and
//!    plateau (no base walks): the largest walk per stride says whether another level
//!    overflows (else the result is a bound: "no further level within this reach"); then
//!    doubling and bisection, the span search and the order test. Up to [`MAX_LEVELS`].
//!
//! The miss cost of a level is the rise of the 5th percentile from the level before to its
//! plateau (the first doubled walk past its overflow; the walk at the bisected boundary may
//! still be in a gradual transition); its distribution is the shift of every quantile
//! (the plateau's sorted loads less the level before's, rank by rank), not the loads less
//! one number.

use topology::LatencySummary;

use crate::error::RunnerError;

mod interleave;
mod order;
mod rise;

use interleave::interleave_test;
use order::order_check;
pub use order::{order_stride, OrderCheck};
use rise::{base_walks, first_rise, largest_fitting, miss, reach, Rise, Start};

/// The line size the skew counts in: each node's line is a few of these further into its
/// page than the previous node's ([`step_bytes`]).
pub const SKEW: u32 = 128;

/// Bytes between consecutive nodes of a walk at `stride`: `stride + m × SKEW` with the
/// smallest odd `m` that makes the distance in lines, `stride / SKEW + m`, divisible by no
/// prime up to 13. Node `i`'s line is then `i` times a number coprime to every set count
/// made of such primes (a power of two, or 480 sets of a 240 KiB four-way L1), so the first
/// `sets` nodes fall into distinct sets and the data overflows no set before it overflows
/// the cache.
///
/// ```
/// use pchase_runner::measure::tlb::step_bytes;
/// // 16385 lines (2 MiB + 1 line) is 5 · 29 · 113; 16391 is prime.
/// assert_eq!(step_bytes(2 << 20), 16391 * 128);
/// assert_eq!(step_bytes(8 << 20), 65537 * 128);
/// ```
pub fn step_bytes(stride: u64) -> u64 {
    let lines = stride / u64::from(SKEW);
    let m = (1..)
        .step_by(2)
        .find(|m| [3, 5, 7, 11, 13].iter().all(|p| (lines + m) % p != 0))
        .unwrap_or(1);
    (lines + m) * u64::from(SKEW)
}

/// Candidate page sizes (and the strides of the page-size search), ascending: every power
/// of two from 64 KiB to 1 GiB (Hopper's MMU has 512 MiB pages besides 2 MiB and 64 KiB
/// ones, `docs/measurement.md`).
pub const STRIDES: [u64; 15] = [
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
    32 << 20,
    64 << 20,
    128 << 20,
    256 << 20,
    512 << 20,
    1 << 30,
];

/// The most translation levels searched.
pub const MAX_LEVELS: usize = 3;

/// How far a search may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlbLimits {
    /// The largest chain, in bytes (nodes × (stride + skew)).
    pub max_bytes: u64,
    /// The most nodes (distinct lines) of a chase: on the L1 path the data must stay in
    /// the L1, or the data's own misses would rise like a translation level.
    pub max_nodes: u64,
}

/// A rise of the walks' latency that is not a translation level: the same lines walked in
/// grouped order did not rise over address order ([`OrderCheck`]), or, without that test,
/// no smaller stride repeated it. On the L2 path such a rise is
/// a data effect (an H100's walks of 2207+ nodes 32 MiB apart lose their near-partition
/// copies and pay the far partition's hit, `docs/measurement.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedRise {
    /// The stride it rose at.
    pub stride: u64,
    /// The first node count that rose.
    pub nodes: u64,
    /// The 5th percentile before and at the rise (cycles).
    pub before_cycles: f64,
    /// See `before_cycles`.
    pub after_cycles: f64,
    /// The median of the rising walk (cycles).
    pub after_p50: f64,
    /// The largest smaller stride whose walk of as many nodes did not rise like it.
    pub retried_stride: Option<u64>,
    /// The order test, where the limits allowed it (it did not confirm the rise).
    pub order: Option<OrderCheck>,
}

/// The largest walk at one stride that did not rise over that stride's one-node walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlatWalk {
    /// The stride.
    pub stride: u64,
    /// Its nodes.
    pub nodes: u64,
    /// Its bytes (nodes × [`step_bytes`]).
    pub bytes: u64,
}

/// One translation level found.
#[derive(Debug, Clone, PartialEq)]
pub struct TlbLevelFinding {
    /// Entries it holds (one less than the smallest walk that overflows it), where the
    /// span of an entry is known.
    pub entries: Option<u64>,
    /// Bytes it maps: `entries × span`; without the span, the bytes of the largest walk
    /// that did not overflow it (at the largest stride, an upper estimate by at most one
    /// stride per entry).
    pub reach_bytes: u64,
    /// The virtual-address span one of its entries maps, where the strides determined it:
    /// the page where an entry holds one page, more where it holds several (the H100's
    /// 16 MiB and 32 MiB over 2 MiB pages).
    pub entry_bytes: Option<u64>,
    /// Into how many groups consecutive `entry_bytes` ranges are dealt (range `i` to group
    /// `i mod interleave`), each holding `entries / interleave`: walks `interleave ×
    /// entry_bytes` apart fill one group only (the interleave test, step 2b). 1 where the
    /// test found none or did not run.
    pub interleave: u64,
    /// The order test that confirmed it (`None` where the limits did not allow one).
    pub order_check: Option<OrderCheck>,
    /// Cycles a load that misses it (and hits the next level) adds.
    pub miss_cycles: f64,
    /// The 5th-percentile latency before and after its overflow (cycles).
    pub before_cycles: f64,
    /// See `before_cycles`.
    pub after_cycles: f64,
    /// The miss cost's distribution: the sorted loads of the level's plateau (the first
    /// doubled walk past its overflow) less the sorted loads of the level before's (or of
    /// the base walk), rank by rank: the shift of every quantile.
    pub miss: Option<LatencySummary>,
}

/// What the search found on one load path.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TlbFinding {
    /// The levels, nearest first.
    pub levels: Vec<TlbLevelFinding>,
    /// Pages the largest walk without a further level touched, and its bytes: the bound
    /// "no further level within this reach" (None when [`MAX_LEVELS`] were found).
    pub bound_pages: Option<u64>,
    /// The bytes of that largest walk (nodes × (stride + skew)).
    pub bound_bytes: Option<u64>,
    /// Rises that did not count as a translation level, in the order found.
    pub rejected: Vec<RejectedRise>,
    /// Per stride of the first level's search, largest first: the largest walk without a
    /// rise (the honest bound where no level was found).
    pub flat: Vec<FlatWalk>,
    /// Chases run.
    pub probes: u32,
}

impl TlbFinding {
    /// Level 1's entry span, where found and determined.
    pub fn entry_bytes(&self) -> Option<u64> {
        self.levels.first().and_then(|l| l.entry_bytes)
    }

    /// Level 1's order test, where one ran.
    pub fn order_check(&self) -> Option<OrderCheck> {
        self.levels.first().and_then(|l| l.order_check)
    }
}

/// One search: a load path in a region of one allocation, and what it found.
#[derive(Debug, Clone, PartialEq)]
pub struct TlbSearch {
    /// The load path walked.
    pub path: crate::backend::LoadPath,
    /// The region the walks ran in (its allocation, bytes and chunk).
    pub region: crate::walk::WalkRegion,
    /// The levels, page size and bound.
    pub finding: TlbFinding,
}

/// Whether `after` is a rise over `before`: above by more than max(4 cycles, 3 %).
pub fn rises(before: f64, after: f64) -> bool {
    after - before > (0.03 * before).max(4.0)
}

/// The 5th percentile (nearest rank) of `samples`; infinite for none, which never rises.
pub fn p5(samples: &[f64]) -> f64 {
    let sorted = sorted_finite(samples);
    if sorted.is_empty() {
        return f64::INFINITY;
    }
    nearest_rank(&sorted, 5)
}

/// The finite values of `samples`, ascending.
fn sorted_finite(samples: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// The `pct`th percentile of non-empty ascending `sorted`, by nearest rank.
fn nearest_rank(sorted: &[f64], pct: usize) -> f64 {
    sorted[(sorted.len() * pct).div_ceil(100).saturating_sub(1)]
}

/// The search, over a `probe(nodes, stride, group)` that runs a chase of `nodes` nodes
/// [`step_bytes`]`(stride)` apart, visited in groups of `group` (1: address order,
/// [`crate::walk::WalkRequest`]), and returns its per-load latencies in cycles (overhead
/// removed).
///
/// # Errors
/// The probe's errors; [`RunnerError::InvalidRequest`] when the limits do not allow even
/// the first level's search at the largest stride.
pub fn search(
    limits: TlbLimits,
    mut probe: impl FnMut(u64, u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<TlbFinding, RunnerError> {
    let mut finding = TlbFinding::default();
    let mut counted = |n: u64, stride: u64, group: u64, f: &mut TlbFinding| {
        f.probes += 1;
        probe(n, stride, group)
    };

    let fits =
        |n: u64, stride: u64| n <= limits.max_nodes && n * step_bytes(stride) <= limits.max_bytes;
    if !fits(2, STRIDES[0]) {
        return Err(RunnerError::InvalidRequest(format!(
            "a TLB search needs at least {} B of chain and two nodes",
            2 * step_bytes(STRIDES[0])
        )));
    }
    // 1.-3. Level 1 from the largest stride down; then (4.) every further level the same
    //    way from the previous level's overflow, over the strides of at least its span.
    let largest = (0..STRIDES.len())
        .rev()
        .find(|&i| fits(2, STRIDES[i]))
        .unwrap_or(0);
    let mut previous: Option<(Rise, usize)> = None;
    while finding.levels.len() < MAX_LEVELS {
        let found = find_level(
            &mut finding,
            previous.as_ref(),
            largest,
            limits.max_nodes,
            &fits,
            &mut |n, s, g, f| counted(n, s, g, f),
        )?;
        let Some((level, rise, span_index)) = found else {
            break;
        };
        finding.levels.push(level);
        previous = Some((rise, span_index));
    }
    if finding.levels.len() >= MAX_LEVELS {
        (finding.bound_pages, finding.bound_bytes) = (None, None);
    }
    Ok(finding)
}

/// One level's search: from the largest stride down to the previous level's span (all
/// strides for level 1), the largest walk against the base, then the first rising node
/// count, the span search, and the order test. Level 1's base comes from each stride's
/// base walks; a further level's is the previous level's overflow (`previous`: its rise
/// and the index of its span, or of the stride that found it where the span is unknown).
/// Returns the level, its rise and the index of its span; `None` where no stride rose
/// (the bound and, for level 1, the flat walks are then in `finding`).
fn find_level(
    finding: &mut TlbFinding,
    previous: Option<&(Rise, usize)>,
    largest: usize,
    max_nodes: u64,
    fits: &impl Fn(u64, u64) -> bool,
    counted: &mut impl FnMut(u64, u64, u64, &mut TlbFinding) -> Result<Vec<f64>, RunnerError>,
) -> Result<Option<(TlbLevelFinding, Rise, usize)>, RunnerError> {
    let lowest = previous.map_or(0, |p| p.1);
    let mut flat = Vec::new();
    for i in (lowest..=largest).rev() {
        let stride = STRIDES[i];
        if !fits(2, stride) {
            continue;
        }
        let start = match previous {
            None => base_walks(stride, fits, &mut |n, s| counted(n, s, 1, finding))?,
            Some((rise, _)) => Start {
                n: rise.n,
                base: rise.after,
                samples: rise.samples.clone(),
            },
        };
        let base = start.base;
        let top = largest_fitting(stride, fits);
        if top <= start.n {
            continue;
        }
        // The largest walk first: where it does not rise, no smaller one does.
        let at_top = p5(&counted(top, stride, 1, finding)?);
        let rise = if rises(base, at_top) {
            first_rise(start, stride, fits, &mut |n, s| counted(n, s, 1, finding))?
        } else {
            None
        };
        match rise {
            Some(rise) => {
                let hi =
                    smallest_repeating(lowest, i, &rise, base, fits, &mut flat, &mut |n, s| {
                        counted(n, s, 1, finding)
                    })?;
                let check =
                    order_check(hi, rise.n, fits, &mut |n, s, g| counted(n, s, g, finding))?;
                let translation = match &check {
                    Some(c) if c.confirms() => true,
                    // Not confirmed: a data effect, unless found at the largest stride tried
                    // with no smaller one repeating it, where entries larger than that
                    // stride would pair the test's groups (half the loads hitting).
                    Some(_) => hi == i && i >= largest,
                    // Without the order test: repeated at a smaller stride, or found at the
                    // largest stride tried (the walks at larger strides spanned as many
                    // bytes, as many large entries, without a rise).
                    None => hi < i || i >= largest,
                };
                if translation {
                    if previous.is_none() {
                        keep_flat(finding, flat);
                    }
                    // The span is STRIDES[hi] where a smaller stride repeated the
                    // overflow, or where the order test confirmed it: its groups are
                    // STRIDES[hi] apart, and every grouped load missing means no two
                    // groups share an entry (span at most STRIDES[hi]), while half the
                    // stride not repeating means more than half of it.
                    let confirmed = check.as_ref().is_some_and(OrderCheck::confirms);
                    let span = (hi < i || confirmed).then_some(STRIDES[hi]);
                    // 2b. Entries of half that span, dealt to two halves of the level by
                    // address, look like it to the strides: the interleave test decides.
                    let (at, interleave) = match span {
                        Some(_) => interleave_test(lowest, hi, &rise, fits, &mut |n, s, g| {
                            counted(n, s, g, finding)
                        })?,
                        None => (hi, 1),
                    };
                    let level = TlbLevelFinding {
                        entries: span.map(|_| (rise.n - 1) * interleave),
                        reach_bytes: reach(rise.n - 1, span, stride),
                        entry_bytes: span.map(|_| STRIDES[at]),
                        interleave,
                        order_check: check,
                        miss_cycles: rise.after - rise.before,
                        before_cycles: rise.before,
                        after_cycles: rise.after,
                        miss: miss(&rise),
                    };
                    return Ok(Some((level, rise, if span.is_some() { at } else { i })));
                }
                let p50 =
                    LatencySummary::from_samples(&rise.samples).map_or(rise.after, |l| l.p50.get());
                finding.rejected.push(RejectedRise {
                    stride,
                    nodes: rise.n,
                    before_cycles: rise.before,
                    after_cycles: rise.after,
                    after_p50: p50,
                    retried_stride: hi.checked_sub(1).map(|h| STRIDES[h]),
                    order: check,
                });
                record_flat(&mut flat, stride, rise.n - 1);
            }
            // A smaller stride with the same node limit touches fewer entries: no rise there.
            None => record_flat(&mut flat, stride, top),
        }
        if top == max_nodes {
            break;
        }
    }
    let bound = flat
        .iter()
        .map(|w| (w.nodes, w.bytes))
        .max()
        .or_else(|| previous.map(|p| (p.0.n, p.0.n * step_bytes(STRIDES[lowest]))))
        .unwrap_or((1, 0));
    (finding.bound_pages, finding.bound_bytes) = (Some(bound.0), Some(bound.1));
    if previous.is_none() {
        keep_flat(finding, flat);
    }
    Ok(None)
}

/// Level 1's flat walks, largest stride first, into `finding` ([`TlbFinding::flat`]).
fn keep_flat(finding: &mut TlbFinding, mut flat: Vec<FlatWalk>) {
    flat.sort_by_key(|w| std::cmp::Reverse(w.stride));
    finding.flat = flat;
}

/// Notes `nodes` at `stride` as a walk without a rise (the largest per stride).
fn record_flat(flat: &mut Vec<FlatWalk>, stride: u64, nodes: u64) {
    let walk = FlatWalk {
        stride,
        nodes,
        bytes: nodes * step_bytes(stride),
    };
    match flat.iter_mut().find(|w| w.stride == stride) {
        Some(w) if w.nodes < nodes => *w = walk,
        Some(_) => {}
        None => flat.push(walk),
    }
}

/// The span search for a rise found at `STRIDES[found]`: the index of the smallest
/// stride from `STRIDES[lowest]` on whose walks overflow at the same node count (binary search, the overflow being
/// monotone in the stride); `found` where no smaller stride does. Walks of `rise.n`
/// nodes that did not rise go into `flat`.
fn smallest_repeating(
    lowest: usize,
    found: usize,
    rise: &Rise,
    base: f64,
    fits: &impl Fn(u64, u64) -> bool,
    flat: &mut Vec<FlatWalk>,
    probe: &mut impl FnMut(u64, u64) -> Result<Vec<f64>, RunnerError>,
) -> Result<usize, RunnerError> {
    let (mut lo, mut hi) = (lowest, found);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let stride = STRIDES[mid];
        let same = if fits(rise.n, stride) {
            let before = p5(&probe(rise.n - 1, stride)?);
            let after = p5(&probe(rise.n, stride)?);
            if !rises(base, after) {
                record_flat(flat, stride, rise.n);
            }
            rises(before.min(base), after)
        } else {
            false
        };
        if same {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests;
