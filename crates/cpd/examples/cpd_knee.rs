//! Finds the knee of a latency-versus-size curve read from a CSV file, as a
//! tool depending on `cpd` would: the exact single change point (L2) locates
//! the largest jump, PELT with a BIC penalty finds every level, and a
//! Kolmogorov–Smirnov test checks that the two sides differ.
//!
//! ```text
//! cargo run -p cpd --example cpd_knee -- crates/cpd/examples/data/latency_vs_size.csv
//! ```
//!
//! Without an argument it reads that file.
//!
//! The CSV has a header line and rows `size,latency`; lines starting with `#`
//! are comments.

use cpd::{ks_2samp, pelt, single_change_point, L2Cost, Penalty, SearchOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/data/latency_vs_size.csv"
        )
        .to_owned()
    });
    let text = std::fs::read_to_string(&path)?;
    let mut sizes = Vec::new();
    let mut latencies = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let mut fields = line.split(',');
        let (Some(size), Some(latency)) = (fields.next(), fields.next()) else {
            continue;
        };
        sizes.push(size.trim().parse::<f64>()?);
        latencies.push(latency.trim().parse::<f64>()?);
    }

    let cost = L2Cost::from_series(&latencies)?;
    let knee = single_change_point(&cost, SearchOptions::new(2, 1))?;
    let t = knee.change_point;
    println!(
        "knee: latency jumps between {} KiB and {} KiB (cost {:.1} -> {:.1})",
        sizes[t - 1],
        sizes[t],
        knee.unsplit_cost,
        knee.objective
    );
    let test = ks_2samp(&latencies[..t], &latencies[t..])?;
    println!(
        "Kolmogorov-Smirnov: D = {:.3}, p = {:.2e} ({:?}), significant at 1%: {}",
        test.statistic,
        test.p_value,
        test.method,
        test.rejects_at(0.01)
    );

    // Every level: PELT with a BIC penalty scaled by the noise variance.
    let noise = cpd::estimate_noise_variance(&latencies)?.max(1e-6);
    let penalty = Penalty::Bic.per_change_point(latencies.len(), 1, noise)?;
    let levels = pelt(&cost, penalty, SearchOptions::new(2, 1))?;
    let boundaries: Vec<f64> = levels.change_points().iter().map(|&t| sizes[t]).collect();
    println!("all level changes start at sizes (KiB): {boundaries:?}");
    Ok(())
}
