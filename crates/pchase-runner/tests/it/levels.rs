//! The mixture decomposition on real per-load samples of an H100 and an H200
//! (`tests/data/`, taken from the issue-12 exploration in `docs/results/*/explore-12`): one
//! level inside the near partition, far hits and memory between the near capacity and the
//! L2, memory through the near and the far partition beyond the L2.

use pchase_runner::measure::levels::{modes, Mode};

fn samples(name: &str) -> Vec<f64> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split_whitespace())
        .map(|v| v.parse::<f64>().expect("a number"))
        .collect()
}

fn medians_and_shares(m: &[Mode]) -> Vec<(f64, f64)> {
    m.iter()
        .map(|m| (m.distribution.p50, (m.share * 100.0).round() / 100.0))
        .collect()
}

fn check(name: &str, expected: &[(f64, f64)]) {
    let v = samples(name);
    assert_eq!(v.len(), 8192, "{name}");
    let m: Vec<Mode> = modes(&v, 0.05).into_iter().filter(|m| !m.tail).collect();
    let got = medians_and_shares(&m);
    eprintln!("{name}: {got:?}");
    assert_eq!(m.len(), expected.len(), "{name}: {got:?}");
    for ((p50, share), (want_p50, want_share)) in got.iter().zip(expected) {
        assert!(
            (p50 - want_p50).abs() <= 0.04 * want_p50,
            "{name}: median {p50}, expected about {want_p50}"
        );
        assert!(
            (share - want_share).abs() <= 0.06,
            "{name}: share {share}, expected about {want_share}"
        );
    }
}

#[test]
fn h100_l2_levels_from_real_samples() {
    check("l2-samples-h100-4MiB.txt", &[(277.0, 1.0)]);
    check("l2-samples-h100-38MiB.txt", &[(456.0, 0.5), (561.0, 0.5)]);
    check("l2-samples-h100-120MiB.txt", &[(560.0, 0.5), (745.0, 0.5)]);
}

#[test]
fn h200_l2_levels_from_real_samples() {
    check("l2-samples-h200-4MiB.txt", &[(266.0, 1.0)]);
    check("l2-samples-h200-38MiB.txt", &[(445.0, 0.5), (520.0, 0.5)]);
    check("l2-samples-h200-120MiB.txt", &[(520.0, 0.5), (690.0, 0.5)]);
}
