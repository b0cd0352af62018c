//! Times one `cpd` search on a raw little-endian f64 file, for
//! scripts/cpd/compare_ruptures.py, and prints the result as one JSON line.
//!
//! ```text
//! cpd_speed search <file> <n_dims> <l2|rbf> <gamma|-> <dynp|pelt|single> <n_bkps|penalty> <min_size>
//! cpd_speed eval   <file> <n_dims> <l2|rbf> <gamma|-> <end,end,...>
//! ```
//!
//! The time covers fitting the cost and the search, as ruptures' `fit` plus
//! `predict` does; reading the file is excluded.

use std::time::Instant;

use cpd::{dynp, pelt, single_change_point, Gamma, L2Cost, RbfCost, SearchOptions, SegmentCost};
use ndarray::Array2;

fn fit(signal: &Array2<f64>, cost: &str, gamma: &str) -> Box<dyn SegmentCost> {
    match cost {
        "l2" => Box::new(L2Cost::new(signal.view()).expect("finite signal")),
        "rbf" => {
            let gamma = match gamma {
                "-" => Gamma::MedianHeuristic,
                g => Gamma::Fixed(g.parse().expect("gamma is a number")),
            };
            Box::new(RbfCost::new(signal.view(), gamma).expect("finite signal"))
        }
        other => panic!("unknown cost {other}"),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[2]).expect("readable signal file");
    let values: Vec<f64> = bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let dims: usize = args[3].parse().expect("n_dims");
    let signal = Array2::from_shape_vec((values.len() / dims, dims), values).expect("whole rows");
    match args[1].as_str() {
        "search" => {
            let min_size: usize = args[8].parse().expect("min_size");
            let options = SearchOptions::new(min_size, 1);
            let started = Instant::now();
            let cost = fit(&signal, &args[4], &args[5]);
            let seg = match args[6].as_str() {
                "dynp" => dynp(cost.as_ref(), args[7].parse().expect("n_bkps"), options),
                "pelt" => pelt(cost.as_ref(), args[7].parse().expect("penalty"), options),
                "single" => single_change_point(cost.as_ref(), options).map(|s| s.segmentation()),
                other => panic!("unknown search {other}"),
            }
            .expect("search succeeds");
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{{\"seconds\": {seconds}, \"bkps\": {:?}, \"cost\": {}, \"objective\": {}}}",
                seg.segment_ends,
                seg.total_cost(),
                seg.objective
            );
        }
        "eval" => {
            let cost = fit(&signal, &args[4], &args[5]);
            let ends: Vec<usize> = args[6]
                .split(',')
                .map(|e| e.parse().expect("end"))
                .collect();
            println!("{{\"cost\": {}}}", cpd::sum_of_costs(cost.as_ref(), &ends));
        }
        other => panic!("unknown mode {other}"),
    }
}
