//! Criterion benchmarks of `cpd`'s searches: the single change point with L2
//! at n = 10⁶ (goal: under 10 ms), and PELT / dynamic programming with the L2
//! and RBF costs on seeded piecewise-constant series (the specialised paths:
//! functional pruning for L2, the fused kernel loop for RBF).

use cpd::{
    dynp, pelt, single_change_point, single_change_point_l2, Gamma, L2Cost, RbfCost, SearchOptions,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `segments` equal-length levels 0, 3, 6, ... (alternating sign) with uniform noise.
fn piecewise(n: usize, segments: usize, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let level = (i * segments / n) as f64
                * 3.0
                * if (i * segments / n) % 2 == 0 {
                    1.0
                } else {
                    -1.0
                };
            level + rng.random::<f64>() - 0.5
        })
        .collect()
}

fn single(c: &mut Criterion) {
    let series = piecewise(1_000_000, 2, 1);
    c.bench_function("single_l2_n1e6", |b| {
        b.iter(|| single_change_point_l2(&series, SearchOptions::default()).unwrap())
    });
    c.bench_function("single_l2_generic_cost_n1e6", |b| {
        b.iter(|| {
            let cost = L2Cost::from_series(&series).unwrap();
            single_change_point(&cost, SearchOptions::default()).unwrap()
        })
    });
}

fn searches(c: &mut Criterion) {
    let mut group = c.benchmark_group("search");
    group.sample_size(10);
    for &n in &[1_000usize, 10_000, 100_000] {
        let series = piecewise(n, 6, 2);
        let l2 = L2Cost::from_series(&series).unwrap();
        group.bench_with_input(BenchmarkId::new("pelt_l2", n), &n, |b, _| {
            b.iter(|| pelt(&l2, 3.0 * (n as f64).ln() / 12.0, SearchOptions::default()).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("dynp_l2_k5", n), &n, |b, _| {
            b.iter(|| dynp(&l2, 5, SearchOptions::default()).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("dynp_l2_k1", n), &n, |b, _| {
            b.iter(|| dynp(&l2, 1, SearchOptions::default()).unwrap())
        });
        if n <= 10_000 {
            // The kernel searches are O(n²) kernels: n = 10⁵ takes seconds per run.
            let rbf = RbfCost::from_series(&series, Gamma::Fixed(0.1)).unwrap();
            group.bench_with_input(BenchmarkId::new("pelt_rbf", n), &n, |b, _| {
                b.iter(|| pelt(&rbf, 5.0, SearchOptions::default()).unwrap())
            });
            group.bench_with_input(BenchmarkId::new("dynp_rbf_k5", n), &n, |b, _| {
                b.iter(|| dynp(&rbf, 5, SearchOptions::default()).unwrap())
            });
            group.bench_with_input(BenchmarkId::new("dynp_rbf_k1", n), &n, |b, _| {
                b.iter(|| dynp(&rbf, 1, SearchOptions::default()).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, single, searches);
criterion_main!(benches);
