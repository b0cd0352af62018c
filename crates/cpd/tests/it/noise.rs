//! The noise estimate on staircases measured on a GPU, where the flats repeat one value.

use cpd::{estimate_noise_variance, CpdError};

/// Replica 0 of an L1 size sweep that memtopo measured on an H200
/// (`tests/fixtures/h200-l1-sweep.csv`):
/// 25 sizes at 38.757 cycles per load (one stray 38.7801), then the rise past the L1.
fn h200_l1_sweep() -> Vec<f64> {
    let text = include_str!("../fixtures/h200-l1-sweep.csv");
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (fields.get(1) == Some(&"0")).then(|| fields[3].parse::<f64>().expect("a number"))
        })
        .collect()
}

#[test]
fn a_real_staircase_has_noise_though_most_of_its_steps_are_zero() {
    let series = h200_l1_sweep();
    assert_eq!(series.len(), 39);
    let zero_steps = series.windows(2).filter(|w| w[1] == w[0]).count();
    assert!(
        zero_steps * 2 > series.len() - 1,
        "the MAD alone would be 0"
    );
    let variance = estimate_noise_variance(&series).expect("an estimate");
    // The rise's jitter is a few tenths of a cycle: a variance of order 0.01-0.1, never 0.
    assert!((0.005..0.2).contains(&variance), "{variance}");
}

#[test]
fn a_noisy_series_keeps_the_mad_estimate() {
    // Differences 0.5, -0.5, 0.5, ...: median 0.5 (four of seven), MAD 0 -> trimmed
    // mean square 0.25 / 2; a series with spread differences uses the MAD.
    let alternating = [0.0, 0.5, 0.0, 0.5, 0.0, 0.5, 0.0, 0.5];
    let v = estimate_noise_variance(&alternating).expect("estimate");
    assert!((v - 0.125).abs() < 1e-12, "{v}");
    let spread = [0.0, 1.0, 3.0, 2.0, 6.0, 5.0, 9.0, 7.0];
    let differences = [1.0f64, 2.0, -1.0, 4.0, -1.0, 4.0, -2.0];
    let mut sorted = differences.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[3];
    let mut deviations: Vec<f64> = differences.iter().map(|d| (d - median).abs()).collect();
    deviations.sort_by(f64::total_cmp);
    let sigma = deviations[3] * 1.4826 / 2f64.sqrt();
    let v = estimate_noise_variance(&spread).expect("estimate");
    assert!(
        (v - sigma * sigma).abs() < 1e-12,
        "{v} vs {}",
        sigma * sigma
    );
}

#[test]
fn a_series_without_noise_is_refused() {
    let mut flat_then_step = vec![40.0; 30];
    flat_then_step.extend([80.0; 10]);
    assert_eq!(
        estimate_noise_variance(&flat_then_step),
        Err(CpdError::NoNoise { len: 40 })
    );
}
