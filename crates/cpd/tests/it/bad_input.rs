//! Bad input gives typed errors, never a panic or a silent number.

use cpd::{
    binseg, dynp, ks_2samp, pelt, single_change_point, BinsegStop, CpdError, Gamma,
    GeometricMapping, L2Cost, NormalCost, RbfCost, SearchOptions,
};
use ndarray::{array, Array2};
use proptest::prelude::*;

#[test]
fn empty_series_is_rejected() {
    assert!(matches!(
        L2Cost::from_series(&[]),
        Err(CpdError::Empty { .. })
    ));
    assert!(matches!(ks_2samp(&[], &[1.0]), Err(CpdError::Empty { .. })));
    let empty = Array2::<f64>::zeros((0, 3));
    assert!(matches!(
        GeometricMapping::default().map(empty.view()),
        Err(CpdError::Empty { .. })
    ));
}

#[test]
fn overflowing_squares_are_refused() {
    // Finite, but (1e200)² is not: every L2 cost would be infinite or NaN.
    for series in [vec![1e200, 0.0, 1.0], vec![1.5e285, 0.0]] {
        assert!(matches!(
            L2Cost::from_series(&series),
            Err(CpdError::Overflow { .. })
        ));
        let column = Array2::from_shape_vec((series.len(), 1), series).unwrap();
        assert!(matches!(
            L2Cost::new(column.view()),
            Err(CpdError::Overflow { .. })
        ));
    }
    assert!(L2Cost::from_series(&[1e150, 0.0, 1.0]).is_ok());
    let samples = array![[2e230, 0.0], [0.0, 1.0], [1.0, 3.0], [0.5, 0.0]];
    let mapping = GeometricMapping {
        reference: None,
        mad_scaling: false,
    };
    assert!(matches!(
        mapping.map(samples.view()),
        Err(CpdError::Overflow { .. })
    ));
}

#[test]
fn non_finite_values_are_located() {
    assert!(matches!(
        L2Cost::from_series(&[1.0, f64::NAN]).unwrap_err(),
        CpdError::NonFinite { row: 1, column: 0, value } if value.is_nan()
    ));
    let err = L2Cost::new(array![[1.0, 2.0], [3.0, f64::INFINITY]].view()).unwrap_err();
    assert!(matches!(
        err,
        CpdError::NonFinite {
            row: 1,
            column: 1,
            ..
        }
    ));
}

#[test]
fn short_series_and_too_many_change_points() {
    let cost = L2Cost::from_series(&[1.0, 2.0, 3.0]).unwrap();
    assert!(matches!(
        single_change_point(&cost, SearchOptions::new(2, 1)),
        Err(CpdError::TooShort { len: 3, needed: 4 })
    ));
    let cost = L2Cost::from_series(&[0.0; 10]).unwrap();
    assert_eq!(
        dynp(&cost, 5, SearchOptions::new(2, 1)).unwrap_err(),
        CpdError::TooManyChangePoints {
            requested: 5,
            max: 4
        }
    );
    assert!(matches!(
        binseg(&cost, BinsegStop::ChangePoints(9), SearchOptions::default()),
        Err(CpdError::TooManyChangePoints { .. })
    ));
}

#[test]
fn pelt_penalty_must_be_positive() {
    let cost = L2Cost::from_series(&[0.0, 1.0, 0.0, 1.0]).unwrap();
    for penalty in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            pelt(&cost, penalty, SearchOptions::default()),
            Err(CpdError::InvalidPenalty { .. })
        ));
    }
}

#[test]
fn mismatched_dimensions_and_bad_parameters() {
    let samples = array![[1.0, 2.0], [3.0, 4.0]];
    let mapping = GeometricMapping {
        reference: Some(vec![1.0, 1.0, 1.0]),
        mad_scaling: false,
    };
    assert_eq!(
        mapping.map(samples.view()).unwrap_err(),
        CpdError::DimensionMismatch {
            what: "reference entries (one per column)",
            expected: 2,
            found: 3
        }
    );
    assert!(matches!(
        RbfCost::from_series(&[1.0, 2.0], Gamma::Fixed(0.0)),
        Err(CpdError::InvalidParameter { name: "gamma", .. })
    ));
    assert!(matches!(
        NormalCost::with_variance_floor(samples.view(), 0.0),
        Err(CpdError::InvalidParameter {
            name: "variance_floor",
            ..
        })
    ));
    let cost = L2Cost::from_series(&[0.0; 8]).unwrap();
    assert!(matches!(
        single_change_point(&cost, SearchOptions::new(0, 1)),
        Err(CpdError::InvalidParameter {
            name: "min_size",
            ..
        })
    ));
    assert!(matches!(
        dynp(&cost, 1, SearchOptions::new(1, 0)),
        Err(CpdError::InvalidParameter { name: "jump", .. })
    ));
}

#[test]
fn constant_segments_give_finite_normal_costs() {
    let cost = NormalCost::from_series(&[2.0; 12]).unwrap();
    let seg = pelt(&cost, 1.0, SearchOptions::default()).unwrap();
    assert!(seg.objective.is_finite());
    assert_eq!(seg.segment_ends, vec![12]);
}

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -1e6f64..1e6,
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => any::<f64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the values, every entry point returns a result: a number or a
    /// typed error. A number is never NaN.
    #[test]
    fn arbitrary_vectors_never_panic(
        values in proptest::collection::vec(any_f64(), 0..24),
        other in proptest::collection::vec(any_f64(), 0..6),
        min_size in 0usize..5,
        jump in 0usize..4,
        k in 0usize..6,
        penalty in prop_oneof![Just(0.0), Just(-1.0), 0.01f64..10.0],
    ) {
        let options = SearchOptions::new(min_size, jump);
        if let Ok(cost) = L2Cost::from_series(&values) {
            for seg in [
                single_change_point(&cost, options).map(|s| s.segmentation()),
                dynp(&cost, k, options),
                pelt(&cost, penalty, options),
                binseg(&cost, BinsegStop::ChangePoints(k), options),
                binseg(&cost, BinsegStop::Penalty(penalty), options),
            ].into_iter().flatten() {
                prop_assert!(!seg.objective.is_nan());
                prop_assert_eq!(seg.segment_ends.last().copied(), Some(values.len()));
            }
        } else {
            prop_assert!(
                values.is_empty()
                    || values.iter().any(|v| !v.is_finite())
                    || values.iter().any(|v| v.abs() > 1e150)
            );
        }
        for cost in [
            NormalCost::from_series(&values).map(|c| Box::new(c) as Box<dyn cpd::SegmentCost>),
            RbfCost::from_series(&values, Gamma::MedianHeuristic).map(|c| Box::new(c) as Box<dyn cpd::SegmentCost>),
            cpd::RankCost::from_series(&values).map(|c| Box::new(c) as Box<dyn cpd::SegmentCost>),
            cpd::L1Cost::from_series(&values).map(|c| Box::new(c) as Box<dyn cpd::SegmentCost>),
        ].into_iter().flatten() {
            if let Ok(seg) = pelt(cost.as_ref(), penalty, options) {
                prop_assert!(!seg.objective.is_nan());
            }
            if let Ok(seg) = dynp(cost.as_ref(), k, options) {
                prop_assert!(!seg.objective.is_nan());
            }
        }
        if let Ok(test) = ks_2samp(&values, &other) {
            prop_assert!((0.0..=1.0).contains(&test.p_value));
            prop_assert!((0.0..=1.0).contains(&test.statistic));
        }
        let _ = cpd::ks_max_split_permutation_test(&values, min_size, 5, 1);
        let _ = cpd::estimate_noise_variance(&values);
        if values.len() % 2 == 0 && !values.is_empty() {
            let samples = Array2::from_shape_vec((values.len() / 2, 2), values.clone()).unwrap();
            let mapping = GeometricMapping { reference: None, mad_scaling: true };
            if let Ok(mapped) = mapping.map(samples.view()) {
                prop_assert!(mapped.distance.iter().chain(&mapped.angle).all(|v| v.is_finite()));
            }
        }
    }
}
