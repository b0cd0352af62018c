//! The links of a node summary: the rates over a link against its peak and the all-pairs
//! copy (fleet schema 1.3), how older documents load, how broken figures are refused, how
//! the fleet compares the rates, and how the reports show them.

use serde_json::Value;
use topology::fleet::*;
use topology::*;

/// A GPU entry of node `node`, device `index`.
fn gpu(node: &str, index: u32) -> GpuEntry {
    let mut topo = Topology::new(DeviceInfo::new(
        "NVIDIA H100 80GB HBM3",
        ComputeCapability::new(9, 0),
        132,
    ));
    topo.element_mut(ElementKind::L2)
        .set_size(Size::api(Bytes::mib(50)));
    let mut entry = GpuEntry::from_topology(&topo, Some(format!("GPU-{node}-{index}")), None);
    entry.node = Some(node.into());
    entry.device_index = Some(index);
    entry
}

/// A measured NVLink 4 link: every rate `scale` times a healthy H100's (illustrative).
fn link(from: u32, to: u32, node: &str, scale: f64) -> PeerLink {
    let mut link = PeerLink::new(from, to);
    link.from_uuid = Some(format!("GPU-{node}-{from}"));
    link.to_uuid = Some(format!("GPU-{node}-{to}"));
    link.peer_access = true;
    link.nvlink_links = Some(18);
    link.nvlink_generation = Some(4);
    link.copy_gib_per_s = Some(365.0 * scale);
    link.copy_bytes = Some(256 << 20);
    link.copy_pull = Some(LinkRate::new(400.0 * scale, "copy engine, 2 streams"));
    link.copy_push = Some(LinkRate::new(410.0 * scale, "copy engine, 1 stream"));
    link.copy_both = Some(BothWays::new(
        LinkRate::new(380.0 * scale, "copy engine, 2 streams"),
        LinkRate::new(385.0 * scale, "copy engine, 1 stream"),
    ));
    link.sm_read = Some(LinkRate::new(415.0 * scale, "read .cg 16 B ×4"));
    link.sm_write = Some(LinkRate::new(425.0 * scale, "write 16 B ×4"));
    link.set_peak(Some(450.0));
    link
}

/// A node of two GPUs, its links scaled by `scale` (0 → 1 by `slow`), both at once.
fn node(name: &str, scale: f64, slow: f64) -> (Vec<GpuEntry>, Node) {
    let links = vec![link(0, 1, name, scale * slow), link(1, 0, name, scale)];
    let mut all = AllPairs {
        copy_bytes: 64 << 20,
        pairs: vec![
            PairRate {
                from: 0,
                to: 1,
                gb_per_s: 370.0 * scale * slow,
                fraction_of_peak: None,
            },
            PairRate {
                from: 1,
                to: 0,
                gb_per_s: 372.0 * scale,
                fraction_of_peak: None,
            },
        ],
        total_gb_per_s: 370.0 * scale * slow + 372.0 * scale,
        notes: Vec::new(),
    };
    all.set_peaks(&links);
    let node = Node {
        name: name.into(),
        host: None,
        devices_requested: Some("all".into()),
        device_count: Some(2),
        schedule: Some("concurrent".into()),
        links,
        all_pairs: Some(all),
        notes: Vec::new(),
    };
    (vec![gpu(name, 0), gpu(name, 1)], node)
}

/// Four nodes of two H100s; node `n3`'s link 0 → 1 (and all it moves) at `slow`.
fn fleet(slow: f64) -> Fleet {
    let mut gpus = Vec::new();
    let mut nodes = Vec::new();
    for (i, name) in ["n0", "n1", "n2", "n3"].into_iter().enumerate() {
        let scale = 1.0 + 0.004 * i as f64;
        let (g, n) = node(name, scale, if name == "n3" { slow } else { 1.0 });
        gpus.extend(g);
        nodes.push(n);
    }
    Fleet::build(
        FleetKind::Fleet,
        gpus,
        Vec::new(),
        nodes,
        SpreadOptions::default(),
    )
}

fn flags(fleet: &Fleet) -> Vec<(String, &str, &str)> {
    fleet
        .flags
        .iter()
        .map(|f| (f.label(), f.path.as_str(), f.severity.as_str()))
        .collect()
}

#[test]
fn a_slow_link_is_degraded_on_its_reader_and_healthy_spread_is_not() {
    let healthy = fleet(1.0);
    assert!(healthy.flags.is_empty(), "{:?}", flags(&healthy));
    let values = &healthy.gpus[0].values;
    // A GPU's links, GiB/s as every bandwidth the fleet compares.
    let copy = values["links.copy"].value;
    assert!((copy - 365.0).abs() < 1e-9, "{copy}");
    let push = values["links.copy_push"].value;
    assert!((push - 410e9 / 1_073_741_824.0).abs() < 1e-9, "{push}");
    for path in [
        "links.copy_pull",
        "links.copy_both",
        "links.sm_read",
        "links.sm_write",
        "links.all_pairs_in",
    ] {
        assert_eq!(values[path].kind, ValueKind::Bandwidth, "{path}");
    }
    // 5 % slower: the copy's 3 % tolerance flags it, the new rates' 9 % do not.
    let a_little = fleet(0.95);
    let paths: Vec<&str> = a_little.flags.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["links.copy"], "{:?}", flags(&a_little));
    assert_eq!(a_little.flags[0].label(), "GPU-n3-0");
    assert_eq!(a_little.flags[0].severity, Severity::Degraded);
    // 20 % slower: every rate of the reader's link, and what it pulled at once.
    let slow = fleet(0.8);
    let mut paths: Vec<&str> = slow
        .degraded()
        .filter(|f| f.label() == "GPU-n3-0")
        .map(|f| f.path.as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "links.all_pairs_in",
            "links.copy",
            "links.copy_both",
            "links.copy_pull",
            "links.copy_push",
            "links.sm_read",
            "links.sm_write"
        ],
        "{:?}",
        flags(&slow)
    );
    assert!(
        slow.degraded().all(|f| f.label() == "GPU-n3-0"),
        "{:?}",
        flags(&slow)
    );
}

#[test]
fn link_rates_round_trip_and_broken_ones_name_the_field() {
    let doc = fleet(1.0);
    let json = doc.to_json_string().unwrap();
    assert!(json.contains("\"fleet_schema_version\": \"1.3\""));
    assert_eq!(Fleet::from_json_str(&json).unwrap(), doc);
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut tree: Value = serde_json::from_str(&json).unwrap();
        edit(&mut tree);
        Fleet::from_json_str(&tree.to_string())
            .unwrap_err()
            .to_string()
    };
    let err = broken(&|t| t["nodes"][1]["links"][0]["sm_read"]["fraction_of_peak"] = 0.5.into());
    assert!(
        err.contains("nodes[1].links[0].sm_read.fraction_of_peak"),
        "{err}"
    );
    let err = broken(&|t| t["nodes"][0]["links"][1]["copy_push"]["gb_per_s"] = 0.0.into());
    assert!(
        err.contains("nodes[0].links[1].copy_push.gb_per_s"),
        "{err}"
    );
    let err = broken(&|t| t["nodes"][2]["links"][0]["peak_gb_per_s"] = Value::Null);
    assert!(err.contains("not known"), "{err}");
    let err = broken(&|t| t["nodes"][3]["all_pairs"]["total_gb_per_s"] = 100.0.into());
    assert!(err.contains("nodes[3].all_pairs.total_gb_per_s"), "{err}");
    let err = broken(&|t| t["nodes"][0]["links"][0]["copy_both"]["sum_gb_per_s"] = 1.0.into());
    assert!(err.contains("pull + push"), "{err}");
}

#[test]
fn a_node_summary_of_schema_1_2_loads_without_the_new_figures() {
    let old = r#"{
      "fleet_schema_version": "1.2",
      "kind": "node",
      "options": {"sigmas": 3.0, "relative_tolerance": 0.02, "size_tolerance": 0.05,
                  "count_tolerance": 0, "mad_threshold": 3.5},
      "nodes": [{"name": "vm", "links": [
        {"from": 0, "to": 1, "peer_access": true, "nvlink_links": 18,
         "copy_gib_per_s": 367.0, "copy_bytes": 268435456},
        {"from": 1, "to": 0, "peer_access": true, "nvlink_links": 18,
         "copy_gib_per_s": 363.0, "copy_bytes": 268435456}]}],
      "gpus": [], "models": [], "flags": []
    }"#;
    let fleet = Fleet::from_json_str(old).unwrap();
    let link = &fleet.nodes[0].links[0];
    assert_eq!(link.copy_gib_per_s, Some(367.0));
    assert!(link.peak_gb_per_s.is_none() && link.copy_push.is_none());
    assert!(fleet.nodes[0].all_pairs.is_none());
    // The report shows what there is, without shares of a peak it does not know.
    let text = table(&fleet);
    assert!(
        text.contains("367 GiB/s") && text.contains("18 (peak unknown)"),
        "{text}"
    );
    assert!(!text.contains('%'), "{text}");
}

#[test]
fn reports_show_each_rate_beside_its_share_of_the_peak_and_the_pairs_at_once() {
    let (gpus, node) = node("n0", 1.0, 1.0);
    let doc = Fleet::build(
        FleetKind::Node,
        gpus,
        Vec::new(),
        vec![node],
        SpreadOptions::default(),
    );
    let text = table(&doc);
    for want in [
        "18 (450 GB/s)",
        "365 GiB/s (87 %)",
        "pull 400 (89 %) · push 410 (91 %) · both 765 (85 %)",
        "read 415 (92 %) · write 425 (94 %)",
        "All pairs at once on node n0",
        "2 pair(s) copying at once (64 MiB each",
        "742 GB/s in all; per pair 370–372 GB/s (82–83 % of its link's peak)",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    let md = markdown(&doc);
    assert!(md.contains("| copy engine, GB/s | SMs, GB/s |"), "{md}");
    assert!(md.contains("## All pairs at once on node n0"), "{md}");
    let page = html(&doc);
    assert!(page.contains("pull 400 (89 %) · push 410 (91 %)"), "{page}");
}
