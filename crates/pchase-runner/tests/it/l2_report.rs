//! The near partition in the topology: between what one SM's array kept and an equal share
//! of the L2, never beyond it (H200 GPU-5ddc925c: near hits fell to half at 32.8 MiB in
//! four of eight runs; a report that followed them would give two partitions of 32.8 MiB
//! in a 60 MiB L2, a topology that fails its own validation, and no JSON, exit 6).

use pchase_runner::{measure::report::to_topology, sim::SimProfile};
use topology::{Bytes, SizeBound};

use crate::pipeline::measure_only;

#[test]
fn a_near_capacity_beyond_an_equal_share_of_the_l2_is_bounded_by_it() {
    let profile = SimProfile::bundled("h200").expect("bundled");
    let measured = measure_only(&profile, "l2");
    let share = profile.l2.partition_bytes();
    let with_near = |bytes: u64| {
        let mut m = measured.clone();
        m.l2.as_mut().expect("L2 measured").near_capacity = Some((bytes, true));
        let topo = to_topology(&profile.device, &m, "test");
        topo.validate().expect("a valid topology");
        let partitions = topo.l2_partitions().expect("partitions").clone();
        (partitions, topo)
    };
    // As measured: exactly the share.
    let (exact, _) = with_near(share);
    assert_eq!(
        exact.size_each.expect("size").bound,
        SizeBound::Exact(Bytes(share))
    );
    // Beyond it (the H200's 32.8 of 30 MiB): the share, with a note.
    let (beyond, topo) = with_near(share + share / 10);
    assert_eq!(
        beyond.size_each.expect("size").bound,
        SizeBound::Exact(Bytes(share))
    );
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.contains("beyond an equal share of the L2")));
    // Below it (the H200's 28.4 of 30 MiB): between the two.
    let below = share - share / 20;
    let (between, _) = with_near(below);
    assert_eq!(
        between.size_each.expect("size").bound,
        SizeBound::Between(Bytes(below), Bytes(share))
    );
}
