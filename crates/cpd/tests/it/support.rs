//! Shared helpers: building costs by name and comparing floats.

use cpd::{Gamma, L1Cost, L2Cost, NormalCost, RankCost, RbfCost, SegmentCost};
use ndarray::Array2;

/// Builds the named cost on a signal (`gamma` only for "rbf"; `None` means the
/// median heuristic).
pub fn make_cost(name: &str, signal: &Array2<f64>, gamma: Option<f64>) -> Box<dyn SegmentCost> {
    let view = signal.view();
    match name {
        "l2" => Box::new(L2Cost::new(view).unwrap()),
        "l1" => Box::new(L1Cost::new(view).unwrap()),
        "normal" => Box::new(NormalCost::new(view).unwrap()),
        "rank" => Box::new(RankCost::new(view).unwrap()),
        "rbf" => Box::new(
            RbfCost::new(view, gamma.map_or(Gamma::MedianHeuristic, Gamma::Fixed)).unwrap(),
        ),
        other => panic!("unknown cost {other}"),
    }
}

/// `|a − b| ≤ rel · max(|a|, |b|)`, with an absolute floor of `rel` for values
/// near zero.
pub fn assert_close(actual: f64, expected: f64, rel: f64, what: &str) {
    let scale = actual.abs().max(expected.abs()).max(1.0);
    assert!(
        (actual - expected).abs() <= rel * scale,
        "{what}: {actual} vs expected {expected} (diff {})",
        (actual - expected).abs()
    );
}
