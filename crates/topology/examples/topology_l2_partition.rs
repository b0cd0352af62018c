//! Loads a topology result file and answers: how large is the near L2
//! partition, and how much slower is the far one?
//!
//! ```text
//! cargo run -p topology --example topology_l2_partition -- crates/topology/examples/data/h200-illustrative.json
//! ```
//!
//! Without an argument it reads `examples/data/h200-illustrative.json` of this crate.

use std::process::ExitCode;

use topology::{ElementKind, Topology};

fn main() -> ExitCode {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/data/h200-illustrative.json"
        )
        .to_owned()
    });
    let topo = match Topology::load(&path) {
        Ok(topo) => topo,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", topo.device.name);
    let Some(partitions) = topo.l2_partitions() else {
        match topo.not_measured_reason(ElementKind::L2, topology::QuantityKind::Partitions) {
            Some(reason) => println!("the L2 partitions were not measured: {reason}"),
            None => println!("this result has no L2 partition measurement"),
        }
        return ExitCode::SUCCESS;
    };
    match &partitions.size_each {
        Some(size) => {
            let count = partitions.count.map_or_else(
                || "an unknown number of".to_owned(),
                |c| c.value.to_string(),
            );
            println!(
                "near L2 partition: {size} (one of {count} partitions, {})",
                size.provenance
            );
        }
        None => println!("near L2 partition: size not measured"),
    }
    match (&partitions.near_latency, &partitions.far_latency) {
        (Some(near), Some(far)) => {
            let penalty = far.mean.get() - near.mean.get();
            println!(
                "near hit: {:.1} cycles (p50 {:.0}, p95 {:.0}); far hit: {:.1} cycles (p50 {:.0}, p95 {:.0})",
                near.mean.get(), near.p50.get(), near.p95.get(), far.mean.get(), far.p50.get(), far.p95.get()
            );
            print!("a far hit is {penalty:.1} cycles slower");
            if let Some(ratio) = partitions.far_ratio() {
                print!(" ({ratio:.2}× the near latency)");
            }
            if let (Some(near_clock), Some(far_clock)) = (topo.clock_for(near), topo.clock_for(far))
            {
                let ns = far.mean_ns(far_clock).get() - near.mean_ns(near_clock).get();
                print!(", {ns:.1} ns at the SM clock");
            }
            println!();
        }
        _ => println!("near and far latencies were not both measured"),
    }
    ExitCode::SUCCESS
}
