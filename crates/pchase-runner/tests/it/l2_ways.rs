//! The L2's ways (`l2-ways`, deep) against simulated L2s.

use pchase_runner::{measure::bench, sim::SimProfile};

use crate::pipeline::measure_only;

#[test]
fn explore() {
    let check = bench::find("l2-ways").expect("registered");
    for name in ["h200"] {
        let profile = SimProfile::bundled(name).unwrap();
        let start = std::time::Instant::now();
        let m = measure_only(&profile, "l2-ways");
        eprintln!("{name}: {:?} host", start.elapsed());
        eprintln!("{:#?}", m.l2_ways);
        for t in &m.timings {
            eprintln!("{} {:?} {:?}", t.benchmark, t.wall, t.gpu);
        }
        eprintln!("{:?}", check.sim_check(&profile, &m));
    }
}
