//! The SMs cluster placement leaves over (`gpc-contention`) against simulated GPUs: the
//! H100's and H200's measured layouts recovered exactly, every check finding its own GPC;
//! a port too wide to be loaded places nothing and says why.

use pchase_runner::{measure::bench, sim::SimProfile};

use crate::pipeline::measure_only;

/// The GPC (index in the reported `gpcs`) of every SM placed by contention.
fn placed(topo: &topology::Topology) -> Vec<(u32, usize)> {
    let clusters = topo.clusters.as_ref().expect("clusters");
    let mut out: Vec<(u32, usize)> = clusters
        .gpcs
        .iter()
        .enumerate()
        .flat_map(|(g, gpc)| gpc.sms_by_contention.iter().map(move |&sm| (sm, g)))
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn the_measured_layouts_are_recovered() {
    let check = bench::find("gpc-contention").expect("registered");
    // The profiles' left-over pairs are SM ids 16-23 (ids are dealt two at a time over the
    // twelve groups); the H100's four pairs belong to GPCs 0, 3, 4 and 5, the H200's to 0.
    for (name, gpcs) in [("h100", [0, 3, 4, 5]), ("h200", [0, 0, 0, 0])] {
        let profile = SimProfile::bundled(name).unwrap();
        let m = measure_only(&profile, "gpc-contention");
        if let Err(why) = check.sim_check(&profile, &m) {
            panic!("{name}: {why}");
        }
        let mut wrong = m.clone();
        let map = wrong.clusters.gpc.as_mut().unwrap();
        map.contention.as_mut().unwrap().tpcs[0].gpc = Some(7);
        assert!(
            check.sim_check(&profile, &wrong).is_err(),
            "{name}: the check passes a wrong placement"
        );
        let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
        topo.validate().unwrap();
        let expected: Vec<(u32, usize)> = (16..24)
            .map(|sm| (sm, gpcs[(sm as usize - 16) / 2]))
            .collect();
        assert_eq!(placed(&topo), expected, "{name}");
        let clusters = topo.clusters.as_ref().unwrap();
        assert!(clusters.unassigned_sms.is_empty(), "{name}");
        let total: usize = clusters.gpcs.iter().map(|g| g.sms.len()).sum();
        assert_eq!(total, 132, "{name}");
        let contention = clusters.contention.as_ref().unwrap();
        assert!(contention.checks.len() >= 7, "{name}: {contention:?}");
        assert!(contention
            .checks
            .iter()
            .all(|c| c.gpc.is_some() && c.gpc == c.expected_gpc));
        let line = topology::render::cluster_lines(&topo)[0].clone();
        assert!(line.starts_with("GPCs: 8 GPCs"), "{line}");
        assert!(line.contains("by contention at the GPCs' ports"), "{line}");
    }
}

#[test]
fn a_port_too_wide_to_load_places_nothing_and_says_why() {
    let mut profile = SimProfile::bundled("h200").unwrap();
    let truth = profile
        .benchmarks
        .get_mut("gpc-contention")
        .and_then(toml::Value::as_table_mut)
        .expect("the profile models contention");
    truth.insert("port_sms".into(), toml::Value::Float(64.0));
    let m = measure_only(&profile, "gpc-contention");
    let contention = m
        .clusters
        .gpc
        .as_ref()
        .unwrap()
        .contention
        .as_ref()
        .unwrap();
    assert!(!contention.agrees());
    assert!(contention.tpcs.iter().all(|t| t.gpc.is_none()));
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    let clusters = topo.clusters.as_ref().unwrap();
    assert_eq!(clusters.unassigned_sms.len(), 8);
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.contains("the left-over SMs stay unassigned")));
    let line = topology::render::cluster_lines(&topo)[0].clone();
    assert!(line.contains("at least 8 GPCs"), "{line}");
}
