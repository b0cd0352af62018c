//! Times one `cpd` search on a raw little-endian f64 file, for
//! scripts/cpd/compare_ruptures.py, and prints the result as one JSON line.
//!
//! ```text
//! cpd_speed search <file> <n_dims> <l2|rbf> <gamma|-> <dynp|pelt|single> <n_bkps|penalty> <min_size> [repeats]
//! cpd_speed eval   <file> <n_dims> <l2|rbf> <gamma|-> <end,end,...>
//! ```
//!
//! The time covers fitting the cost and the search, as ruptures' `fit` plus
//! `predict` does; reading the file is excluded. It is reported twice, as the
//! least over `repeats` runs (default 1): wall-clock seconds and the thread's
//! CPU seconds (`CLOCK_THREAD_CPUTIME_ID`; wall clock where it is missing). On
//! a shared, busy machine the CPU time is the fair measure of the work done.

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

/// CPU time of the calling thread in seconds, if the platform has the clock.
fn thread_cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid, writable timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        (rc == 0).then_some(now.tv_sec as f64 + now.tv_nsec as f64 * 1e-9)
    }
    #[cfg(not(unix))]
    {
        None
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
            let repeats: usize = args.get(9).map_or(1, |r| r.parse().expect("repeats"));
            let options = SearchOptions::new(min_size, 1);
            let (mut seconds, mut cpu_seconds) = (f64::INFINITY, f64::INFINITY);
            let mut result = None;
            for _ in 0..repeats.max(1) {
                let cpu_started = thread_cpu_seconds();
                let started = Instant::now();
                let cost = fit(&signal, &args[4], &args[5]);
                let seg = match args[6].as_str() {
                    "dynp" => dynp(cost.as_ref(), args[7].parse().expect("n_bkps"), options),
                    "pelt" => pelt(cost.as_ref(), args[7].parse().expect("penalty"), options),
                    "single" => {
                        single_change_point(cost.as_ref(), options).map(|s| s.segmentation())
                    }
                    other => panic!("unknown search {other}"),
                }
                .expect("search succeeds");
                let wall = started.elapsed().as_secs_f64();
                let cpu = match (cpu_started, thread_cpu_seconds()) {
                    (Some(a), Some(b)) => b - a,
                    _ => wall,
                };
                seconds = seconds.min(wall);
                cpu_seconds = cpu_seconds.min(cpu);
                result = Some(seg);
            }
            let seg = result.expect("at least one run");
            println!(
                "{{\"seconds\": {seconds}, \"cpu_seconds\": {cpu_seconds}, \"bkps\": {:?}, \"cost\": {}, \"objective\": {}}}",
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
