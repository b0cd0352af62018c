//! Where a chunked region's places get their memory: the pool of physical chunks and the
//! order its chunks take in the range ([`ChunkPlan`], [`ChunkOrder`]). Pure arithmetic, so
//! that the plan is tested without a driver.

use crate::walk::CHUNKED_POOL_CHUNKS;

/// Which chunk each place of a chunked region gets: `j·a mod n` with the smallest
/// `a ≥ 0.618·n` coprime to `n` that is neither 1 nor `n − 1`; where no such `a` exists
/// (`n` of 4 or 6), the odd chunks, then the even ones. From 4 chunks on, neighbouring places
/// never get chunks created one after the other.
///
/// ```
/// use pchase_runner::cuda::vmm::ChunkOrder;
/// let order = ChunkOrder::new(1000);
/// // Neighbouring places never hold chunks created one after the other.
/// assert!((0..999).all(|j| order.chunk(j + 1).abs_diff(order.chunk(j)) != 1));
/// let four = ChunkOrder::new(4);
/// assert_eq!((0..4).map(|j| four.chunk(j)).collect::<Vec<_>>(), [1, 3, 0, 2]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ChunkOrder {
    n: u64,
    multiplier: Option<u64>,
}

impl ChunkOrder {
    /// The order of `n` chunks.
    pub fn new(n: u64) -> ChunkOrder {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let start = ((n as f64 * 0.618) as u64).max(2);
        let multiplier = (start..n.saturating_sub(1))
            .chain(2..start.min(n.saturating_sub(1)))
            .find(|&a| gcd(a, n) == 1);
        ChunkOrder { n, multiplier }
    }

    /// The chunk (in creation order) mapped at place `j` (below `n`).
    pub fn chunk(&self, j: u64) -> u64 {
        match self.multiplier {
            Some(a) => j * a % self.n,
            None => {
                let odds = self.n / 2;
                if j < odds {
                    2 * j + 1
                } else {
                    2 * (j - odds)
                }
            }
        }
    }
}

/// Which physical chunk each place of a chunked region holds: chunk
/// [`ChunkOrder::chunk`]`(j mod pool)` of a pool of `pool` chunks at place `j`.
///
/// ```
/// use pchase_runner::{cuda::vmm::ChunkPlan, walk::CHUNKED_POOL_CHUNKS};
/// // 140 GiB of 2 MiB places over a pool of 2025 chunks.
/// let plan = ChunkPlan::new(71_680);
/// assert_eq!(plan.pool(), CHUNKED_POOL_CHUNKS);
/// // Neighbouring places never hold one chunk, nor chunks created one after the other,
/// // across the pool's wrap included.
/// assert!((0..71_679).all(|j| plan.chunk(j + 1).abs_diff(plan.chunk(j)) > 1));
/// // A region of fewer places than the pool has a chunk of its own at every place.
/// assert_eq!(ChunkPlan::new(1000).pool(), 1000);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ChunkPlan {
    places: u64,
    pool: u64,
    order: ChunkOrder,
}

impl ChunkPlan {
    /// The plan of a region of `places` places: a pool of [`CHUNKED_POOL_CHUNKS`] chunks, or
    /// one chunk per place where the region has fewer places.
    pub fn new(places: u64) -> ChunkPlan {
        ChunkPlan::with_pool(places, places.min(CHUNKED_POOL_CHUNKS))
    }

    /// The plan of `places` places over a pool of `pool` chunks (at most `places`, at least
    /// one).
    pub fn with_pool(places: u64, pool: u64) -> ChunkPlan {
        let pool = pool.clamp(1, places.max(1));
        ChunkPlan {
            places,
            pool,
            order: ChunkOrder::new(pool),
        }
    }

    /// Places of the range (`cuMemMap` calls).
    pub fn places(&self) -> u64 {
        self.places
    }

    /// Physical chunks (`cuMemCreate` calls).
    pub fn pool(&self) -> u64 {
        self.pool
    }

    /// The chunk (in creation order) mapped at place `j` (below [`ChunkPlan::places`]).
    pub fn chunk(&self, j: u64) -> u64 {
        self.order.chunk(j % self.pool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool is mapped over and over, yet no two nodes of a walk (at any candidate
    /// stride, up to more nodes than a 60 MiB L2's quarter holds) share a physical line, and
    /// the first 2025 nodes at a stride of at least one chunk lie in distinct chunks.
    #[test]
    fn walks_over_the_pool_never_share_a_physical_line() {
        use std::collections::HashSet;
        let chunk = 2u64 << 20;
        let places = 71_680; // 140 GiB
        let plan = ChunkPlan::new(places);
        assert_eq!(plan.pool(), CHUNKED_POOL_CHUNKS);
        let line = 128;
        for shift in 16..=30u32 {
            let step = crate::measure::tlb::step_bytes(1 << shift);
            let nodes = (places * chunk / step).min(130_000);
            let mut lines = HashSet::new();
            let mut first_chunks = HashSet::new();
            for i in 0..nodes {
                let v = i * step;
                let place = v / chunk;
                let physical = (plan.chunk(place), v % chunk / line);
                assert!(
                    lines.insert(physical),
                    "stride 2^{shift}: node {i} shares a line"
                );
                if i < CHUNKED_POOL_CHUNKS {
                    first_chunks.insert(physical.0);
                }
            }
            if 1u64 << shift >= chunk {
                assert_eq!(
                    first_chunks.len() as u64,
                    nodes.min(CHUNKED_POOL_CHUNKS),
                    "stride 2^{shift}"
                );
            }
        }
    }

    #[test]
    fn the_chunk_order_is_a_permutation_without_created_neighbours() {
        for n in [4u64, 5, 6, 7, 8, 9, 64, 4097, 37_888] {
            let order = ChunkOrder::new(n);
            let mut seen = vec![false; n as usize];
            for j in 0..n {
                seen[order.chunk(j) as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "{n}: not a permutation");
            assert!(
                (0..n - 1).all(|j| order.chunk(j + 1).abs_diff(order.chunk(j)) != 1),
                "{n}"
            );
        }
        // One to three chunks: every chunk once.
        for n in 1..4u64 {
            let order = ChunkOrder::new(n);
            let mut chunks: Vec<u64> = (0..n).map(|j| order.chunk(j)).collect();
            chunks.sort_unstable();
            assert_eq!(chunks, (0..n).collect::<Vec<_>>());
        }
    }
}
