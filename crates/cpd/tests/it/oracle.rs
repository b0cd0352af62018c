//! A brute-force oracle for short series (n ≤ 14): every admissible
//! segmentation is enumerated and the searches must reach the true optimum.

use cpd::{binseg, dynp, pelt, single_change_point, BinsegStop, SearchOptions, SegmentCost};
use ndarray::Array2;
use proptest::prelude::*;

use crate::support::{assert_close, make_cost};

/// The least cost for every number of change points (index = count), over all
/// segmentations whose change points are multiples of `jump` and whose segments
/// have at least `min_size` samples.
fn brute_force(cost: &dyn SegmentCost, min_size: usize, jump: usize) -> Vec<f64> {
    let n = cost.n_samples();
    let positions: Vec<usize> = (1..n).filter(|t| t % jump == 0).collect();
    let mut best = vec![f64::INFINITY; n];
    for mask in 0u32..(1 << positions.len()) {
        let mut ends: Vec<usize> = positions
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, &t)| t)
            .collect();
        ends.push(n);
        let mut start = 0;
        let mut total = 0.0;
        let mut admissible = true;
        for &end in &ends {
            if end - start < min_size {
                admissible = false;
                break;
            }
            total += cost.segment_cost(start, end);
            start = end;
        }
        if admissible {
            let k = ends.len() - 1;
            best[k] = best[k].min(total);
        }
    }
    best
}

fn short_signal() -> impl Strategy<Value = (Vec<f64>, usize, usize, usize)> {
    (4usize..=14, 1usize..=3, 1usize..=2, 1usize..=2).prop_flat_map(|(n, min_size, jump, d)| {
        (
            proptest::collection::vec(-3.0f64..3.0, n * d),
            Just(min_size),
            Just(jump),
            Just(d),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn searches_reach_the_brute_force_optimum((values, min_size, jump, d) in short_signal()) {
        let n = values.len() / d;
        let signal = Array2::from_shape_vec((n, d), values).unwrap();
        for name in ["l2", "l1", "normal", "rank", "rbf"] {
            let cost = make_cost(name, &signal, None);
            let m = min_size.max(cost.min_segment_len());
            let options = SearchOptions::new(min_size, jump);
            let best = brute_force(cost.as_ref(), m, jump);
            for (k, &optimum) in best.iter().enumerate().skip(1) {
                match dynp(cost.as_ref(), k, options) {
                    Ok(seg) => {
                        assert_close(seg.objective, optimum, 1e-9, name);
                        if let Ok(greedy) = binseg(cost.as_ref(), BinsegStop::ChangePoints(k), options) {
                            prop_assert!(greedy.objective >= optimum - 1e-9 * optimum.abs().max(1.0));
                        }
                    }
                    Err(_) => prop_assert!(optimum.is_infinite(), "{name}: dynp refused k={k}"),
                }
            }
            if best[1].is_finite() {
                let single = single_change_point(cost.as_ref(), options).unwrap();
                assert_close(single.objective, best[1], 1e-9, name);
            }
            if n >= 2 * m {
                for penalty in [0.05, 0.7, 4.0] {
                    let optimum = best
                        .iter()
                        .enumerate()
                        .map(|(k, c)| c + penalty * k as f64)
                        .fold(f64::INFINITY, f64::min);
                    let seg = pelt(cost.as_ref(), penalty, options).unwrap();
                    assert_close(seg.objective, optimum, 1e-9, name);
                }
            }
        }
    }
}
