//! Property tests of what every analysis must respect, whatever the series: change points
//! inside the series and its minimum segment length, the same change points when the
//! series is shifted by a constant, and a noise estimate that is a finite, non-negative
//! number (or a typed error) that ignores shifts and scales with the square of a factor.

use cpd::{
    binseg, dynp, estimate_noise_variance, pelt, single_change_point, BinsegStop, CpdError, L2Cost,
    NormalCost, RankCost, SearchOptions, SegmentCost, Segmentation,
};
use proptest::prelude::*;

/// A staircase of 1–4 steps at least 5 apart, with uniform noise of ±0.5: each
/// segmentation's optimum is unique by a wide margin, so rounding cannot flip it.
fn staircase() -> impl Strategy<Value = (Vec<f64>, usize)> {
    (1usize..=4, 8usize..=24, any::<u64>()).prop_map(|(segments, len, seed)| {
        let mut state = seed | 1;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut series = Vec::new();
        let mut level = 30.0;
        for _ in 0..segments {
            for _ in 0..len {
                series.push(level + uniform() - 0.5);
            }
            level += 5.0 + 200.0 * uniform();
        }
        (series, segments)
    })
}

/// Asserts that `seg` is a segmentation of `n` samples into segments of `min_size` or more.
fn check_bounds(seg: &Segmentation, n: usize, min_size: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(seg.segment_ends.last().copied(), Some(n));
    let mut start = 0;
    for &end in &seg.segment_ends {
        prop_assert!(end > start, "ends increase: {:?}", seg.segment_ends);
        prop_assert!(
            end - start >= min_size,
            "segment {start}..{end} below {min_size}"
        );
        start = end;
    }
    prop_assert_eq!(seg.segment_costs.len(), seg.segment_ends.len());
    prop_assert!(seg.objective.is_finite());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn change_points_lie_inside_the_series_and_its_minimum_segment(
        values in proptest::collection::vec(-1e6f64..1e6, 0..48),
        min_size in 1usize..5,
        jump in 1usize..4,
        k in 1usize..5,
        penalty in 0.01f64..1e3,
    ) {
        let n = values.len();
        let options = SearchOptions::new(min_size, jump);
        let Ok(cost) = L2Cost::from_series(&values) else {
            prop_assert!(values.is_empty());
            return Ok(());
        };
        if let Ok(single) = single_change_point(&cost, options) {
            prop_assert!(single.change_point >= min_size && single.change_point + min_size <= n,
                "{} in a series of {n}, minimum {min_size}", single.change_point);
            prop_assert!(single.change_point % jump == 0, "{} not on the jump grid {jump}", single.change_point);
        }
        for seg in [
            dynp(&cost, k, options),
            pelt(&cost, penalty, options),
            binseg(&cost, BinsegStop::ChangePoints(k), options),
            binseg(&cost, BinsegStop::Penalty(penalty), options),
        ].into_iter().flatten() {
            check_bounds(&seg, n, min_size)?;
            for &c in seg.change_points() {
                prop_assert!(c % jump == 0, "{c} not on the jump grid {jump}");
            }
        }
    }

    #[test]
    fn shifting_the_series_moves_no_change_point(
        (series, segments) in staircase(),
        shift in -1e4f64..1e4,
        jump in 1usize..3,
    ) {
        let shifted: Vec<f64> = series.iter().map(|v| v + shift).collect();
        let options = SearchOptions::new(2, jump);
        let k = segments.max(2) - 1;
        let costs = |s: &[f64]| -> Vec<Box<dyn SegmentCost>> {
            vec![
                Box::new(L2Cost::from_series(s).unwrap()),
                Box::new(NormalCost::from_series(s).unwrap()),
                Box::new(RankCost::from_series(s).unwrap()),
            ]
        };
        for (a, b) in costs(&series).iter().zip(costs(&shifted).iter()) {
            let (a, b) = (a.as_ref(), b.as_ref());
            prop_assert_eq!(
                dynp(a, k, options).unwrap().segment_ends,
                dynp(b, k, options).unwrap().segment_ends
            );
            prop_assert_eq!(
                single_change_point(a, options).unwrap().change_point,
                single_change_point(b, options).unwrap().change_point
            );
        }
        let (a, b) = (L2Cost::from_series(&series).unwrap(), L2Cost::from_series(&shifted).unwrap());
        // Noise variance 1/12, steps ≥ 5: a penalty of 10 keeps exactly the steps.
        prop_assert_eq!(
            pelt(&a, 10.0, options).unwrap().segment_ends,
            pelt(&b, 10.0, options).unwrap().segment_ends
        );
    }

    #[test]
    fn the_noise_estimate_is_finite_non_negative_or_a_typed_error(
        values in proptest::collection::vec(prop_oneof![
            4 => -1e6f64..1e6,
            1 => Just(42.0),
            1 => Just(f64::NAN),
        ], 0..40),
    ) {
        match estimate_noise_variance(&values) {
            Ok(variance) => prop_assert!(variance.is_finite() && variance >= 0.0, "{variance}"),
            Err(CpdError::Empty { .. }) => prop_assert!(values.is_empty()),
            Err(CpdError::TooShort { .. }) => prop_assert!(values.len() < 3),
            Err(CpdError::NonFinite { .. }) => prop_assert!(values.iter().any(|v| !v.is_finite())),
            Err(CpdError::NoNoise { .. }) => {}
            Err(other) => prop_assert!(false, "unexpected error {other}"),
        }
    }

    #[test]
    fn the_noise_estimate_ignores_shifts_and_scales_with_the_square(
        (series, _) in staircase(),
        shift in -1e3f64..1e3,
        factor in 0.1f64..10.0,
    ) {
        let base = estimate_noise_variance(&series).unwrap();
        let shifted: Vec<f64> = series.iter().map(|v| v + shift).collect();
        let scaled: Vec<f64> = series.iter().map(|v| v * factor).collect();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1e-12);
        let moved = estimate_noise_variance(&shifted).unwrap();
        prop_assert!(close(moved, base), "shifted: {moved} vs {base}");
        let grown = estimate_noise_variance(&scaled).unwrap();
        prop_assert!(close(grown, base * factor * factor), "scaled: {grown} vs {base}·{factor}²");
    }
}
