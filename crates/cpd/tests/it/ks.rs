//! Kolmogorov–Smirnov tests against scipy 1.17.1 and the thesis' rules.

use cpd::{ks_2samp, ks_critical_value, ks_max_split_permutation_test, PValueMethod};
use serde::Deserialize;

use crate::support::assert_close;

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<KsCase>,
}

#[derive(Deserialize)]
struct KsCase {
    name: String,
    x: Vec<f64>,
    y: Vec<f64>,
    statistic: f64,
    p_value: f64,
    exact: bool,
    kolmogorov_asymptotic: f64,
}

#[test]
fn known_vectors_match_scipy() {
    let xs = [
        0.95692026,
        1.1348812,
        -0.76579239,
        -0.58065653,
        -0.05122393,
        0.71598754,
        1.39873528,
        0.42790527,
        1.84580764,
        0.64228521,
    ];
    let ys = [
        0.6948678,
        -0.3741825,
        0.36657279,
        1.15834174,
        -0.32421706,
        -0.38499295,
        1.44976991,
        0.2504608,
        -0.53694774,
        1.42221993,
    ];
    let test = ks_2samp(&xs, &ys).unwrap();
    assert_eq!(test.method, PValueMethod::Exact);
    assert!((test.statistic - 0.3).abs() < 1e-15);
    assert!((test.p_value - 0.7869297884777761).abs() < 1e-10);

    let x: Vec<f64> = (1..=10).map(f64::from).collect();
    let y: Vec<f64> = (6..=20).map(f64::from).collect();
    let test = ks_2samp(&x, &y).unwrap();
    assert!((test.statistic - 2.0 / 3.0).abs() < 1e-15);
    assert!((test.p_value - 0.005514629400751357).abs() < 1e-10);
}

#[test]
fn exact_and_asymptotic_p_values_match_scipy_fixtures() {
    let path = format!("{}/tests/fixtures/ks.json", env!("CARGO_MANIFEST_DIR"));
    let cases = serde_json::from_str::<Fixture>(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .cases;
    assert!(cases.len() > 20);
    for case in &cases {
        let test = ks_2samp(&case.x, &case.y).unwrap();
        assert_close(test.statistic, case.statistic, 1e-14, &case.name);
        let asymptotic =
            cpd::ks_asymptotic_p_value(case.x.len(), case.y.len(), test.statistic).unwrap();
        assert!(
            (asymptotic - case.kolmogorov_asymptotic).abs() < 1e-10,
            "{}: asymptotic {asymptotic} vs {}",
            case.name,
            case.kolmogorov_asymptotic
        );
        if case.exact {
            assert_eq!(test.method, PValueMethod::Exact, "{}", case.name);
            assert!(
                (test.p_value - case.p_value).abs() < 1e-10,
                "{}: {} vs scipy {}",
                case.name,
                test.p_value,
                case.p_value
            );
        } else {
            assert_eq!(
                test.method,
                PValueMethod::AsymptoticFallback(cpd::ExactInfeasible::SampleTooLarge),
                "{}",
                case.name
            );
            assert!((test.p_value - case.kolmogorov_asymptotic).abs() < 1e-10);
        }
    }
}

#[test]
fn critical_value_follows_the_thesis_formula() {
    let d = ks_critical_value(0.05, 40, 60).unwrap();
    let expected = (-0.5 * (0.025f64).ln() * 100.0 / 2400.0).sqrt();
    assert!((d - expected).abs() < 1e-15);
    // Smaller alpha demands a larger statistic.
    assert!(ks_critical_value(0.01, 40, 60).unwrap() > d);
}

#[test]
fn permutation_test_is_seeded_and_finds_the_shift() {
    let mut series: Vec<f64> = (0..40).map(|i| ((i * 37) % 11) as f64).collect();
    series.extend((0..25).map(|i| 6.0 + ((i * 13) % 11) as f64));
    let a = ks_max_split_permutation_test(&series, 5, 299, 42).unwrap();
    let b = ks_max_split_permutation_test(&series, 5, 299, 42).unwrap();
    assert_eq!(a, b);
    assert!((38..=42).contains(&a.split), "split {}", a.split);
    assert!(a.p_value < 0.05);
    // A series without a change is not significant.
    let flat: Vec<f64> = (0..60).map(|i| ((i * 37) % 11) as f64).collect();
    let c = ks_max_split_permutation_test(&flat, 5, 299, 42).unwrap();
    assert!(c.p_value > 0.05, "p {}", c.p_value);
}
