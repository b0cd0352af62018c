//! Comparisons with the committed fixtures of scripts/cpd/generate_fixtures.py
//! (ruptures 1.1.10, scipy 1.17.1, numpy 2.3.5).

use cpd::{binseg, dynp, pelt, single_change_point, BinsegStop, GeometricMapping, SearchOptions};
use ndarray::Array2;
use serde::Deserialize;

use crate::support::{assert_close, make_cost};

#[derive(Deserialize)]
struct Fixture<T> {
    cases: Vec<T>,
}

#[derive(Deserialize)]
struct SearchCase {
    name: String,
    cost: String,
    algo: String,
    signal: Vec<Vec<f64>>,
    min_size: usize,
    jump: usize,
    gamma: Option<f64>,
    n_bkps: Option<usize>,
    pen: Option<f64>,
    expected_bkps: Vec<usize>,
    expected_objective: f64,
    ruptures_objective: Option<f64>,
    unique: bool,
}

fn load<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str::<Fixture<T>>(&text).unwrap().cases
}

fn to_array(rows: &[Vec<f64>]) -> Array2<f64> {
    let d = rows[0].len();
    Array2::from_shape_vec((rows.len(), d), rows.concat()).unwrap()
}

#[test]
fn searches_match_ruptures_objectives_and_change_points() {
    let cases: Vec<SearchCase> = load("search.json");
    assert!(cases.len() > 50, "fixture file is unexpectedly small");
    for case in &cases {
        let signal = to_array(&case.signal);
        let cost = make_cost(&case.cost, &signal, case.gamma);
        let options = SearchOptions::new(case.min_size, case.jump);
        let seg = match case.algo.as_str() {
            "single" => single_change_point(cost.as_ref(), options)
                .unwrap()
                .segmentation(),
            "dynp" => dynp(cost.as_ref(), case.n_bkps.unwrap(), options).unwrap(),
            "pelt" => pelt(cost.as_ref(), case.pen.unwrap(), options).unwrap(),
            "binseg" => binseg(
                cost.as_ref(),
                BinsegStop::ChangePoints(case.n_bkps.unwrap()),
                options,
            )
            .unwrap(),
            other => panic!("unknown algorithm {other}"),
        };
        assert_close(seg.objective, case.expected_objective, 1e-9, &case.name);
        if case.unique {
            assert_eq!(seg.segment_ends, case.expected_bkps, "{}", case.name);
        }
        if let Some(ruptures) = case.ruptures_objective {
            // ruptures' PELT may miss the optimum, never beat it.
            assert!(
                seg.objective <= ruptures + 1e-9 * ruptures.abs().max(1.0),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn pelt_returns_the_optimum_where_ruptures_does_not() {
    let cases: Vec<SearchCase> = load("search.json");
    let case = cases
        .iter()
        .find(|c| c.name == "pelt_ruptures_bug")
        .unwrap();
    let seg = pelt(
        make_cost("l2", &to_array(&case.signal), None).as_ref(),
        0.1,
        SearchOptions::new(2, 1),
    )
    .unwrap();
    assert_eq!(seg.segment_ends, vec![5]);
    assert!(seg.objective < case.ruptures_objective.unwrap() - 0.05);
}

#[test]
fn median_heuristic_matches_numpy() {
    let cases: Vec<SearchCase> = load("search.json");
    let mut checked = 0;
    for case in cases.iter().filter(|c| c.cost == "rbf") {
        let signal = to_array(&case.signal);
        let cost = cpd::RbfCost::new(signal.view(), cpd::Gamma::MedianHeuristic).unwrap();
        assert_close(cost.gamma(), case.gamma.unwrap(), 1e-12, &case.name);
        assert!(cost.gamma_is_exact_median());
        checked += 1;
    }
    assert!(checked > 0);
}

#[derive(Deserialize)]
struct GeometricCase {
    name: String,
    samples: Vec<Vec<f64>>,
    reference: Vec<f64>,
    distance: Vec<f64>,
    angle: Vec<f64>,
}

#[test]
fn geometric_mapping_matches_numpy() {
    let cases: Vec<GeometricCase> = load("geometric.json");
    for case in &cases {
        let mapping = GeometricMapping {
            reference: Some(case.reference.clone()),
            mad_scaling: false,
        };
        let mapped = mapping.map(to_array(&case.samples).view()).unwrap();
        for (a, e) in mapped.distance.iter().zip(&case.distance) {
            assert_close(*a, *e, 1e-12, &case.name);
        }
        for (a, e) in mapped.angle.iter().zip(&case.angle) {
            assert_close(*a, *e, 1e-10, &case.name);
        }
    }
}
