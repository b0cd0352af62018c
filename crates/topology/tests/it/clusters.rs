//! The clusters section of schema 1.5: it round-trips, older files load without it, and
//! validation names a bad GPC map.

use topology::*;

fn with_clusters() -> Topology {
    let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 4));
    let summary = LatencySummary::from_samples(&[190.0, 192.0, 188.0]).unwrap();
    topo.clusters = Some(Clusters {
        residency: vec![ClusterResidency {
            cluster_size: 2,
            clusters: 2,
        }],
        gpcs: vec![
            Gpc {
                sms: vec![0, 2, 4],
                sms_by_contention: vec![4],
                l2_partitions: vec![0],
                dsmem_p50: Some(Cycles(190.0)),
            },
            Gpc {
                sms: vec![1, 3],
                sms_by_contention: vec![],
                l2_partitions: vec![],
                dsmem_p50: None,
            },
        ],
        unassigned_sms: vec![5],
        contention: Some(GpcContention {
            loaders: 2,
            checks: vec![TpcContention {
                sms: vec![2],
                expected_gpc: Some(0),
                gpc: Some(0),
                drop_by_gpc: vec![0.2, 0.01],
            }],
            tpcs: vec![
                TpcContention {
                    sms: vec![4],
                    expected_gpc: None,
                    gpc: Some(0),
                    drop_by_gpc: vec![0.25, 0.02],
                },
                TpcContention {
                    sms: vec![5],
                    expected_gpc: None,
                    gpc: None,
                    drop_by_gpc: vec![0.1, 0.09],
                },
            ],
        }),
        gpc_map_consistent: Some(true),
        dsmem: vec![DsmemAtSize {
            cluster_size: 2,
            latency: Latency::measured(summary),
            latency_by_rank: vec![RankLatency {
                rank: 1,
                p50: Cycles(190.0),
            }],
            read_bytes_per_cycle: Some(30.5),
            write_bytes_per_cycle: None,
        }],
        local_read_bytes_per_cycle: Some(120.0),
    });
    topo
}

#[test]
fn the_section_round_trips_through_json_and_toml() {
    let topo = with_clusters();
    topo.validate().unwrap();
    let json = topo.to_json_string().unwrap();
    assert_eq!(Topology::from_json_str(&json).unwrap(), topo);
    let toml = topo.to_toml_string().unwrap();
    assert_eq!(Topology::from_toml_str(&toml).unwrap(), topo);
    assert_eq!(topo.clusters.unwrap().max_cluster_size(), Some(2));
}

#[test]
fn a_1_4_document_loads_without_it() {
    let topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(8, 0), 108));
    let json = topo.to_json_string().unwrap().replace("\"1.5\"", "\"1.4\"");
    assert!(!json.contains("clusters"));
    assert_eq!(Topology::from_json_str(&json).unwrap().clusters, None);
}

#[test]
fn an_sm_in_two_gpcs_or_a_bad_bandwidth_is_refused() {
    let mut topo = with_clusters();
    topo.clusters.as_mut().unwrap().gpcs[1].sms.push(2);
    let err = topo.validate().unwrap_err().to_string();
    assert!(err.contains("clusters") && err.contains("SM 2"), "{err}");
    let mut topo = with_clusters();
    topo.clusters.as_mut().unwrap().dsmem[0].read_bytes_per_cycle = Some(f64::NAN);
    assert!(topo.validate().is_err());
}

#[test]
fn contention_evidence_must_fit_the_gpcs() {
    let mut topo = with_clusters();
    topo.clusters.as_mut().unwrap().gpcs[1]
        .sms_by_contention
        .push(7);
    let err = topo.validate().unwrap_err().to_string();
    assert!(
        err.contains("sms_by_contention") && err.contains("SM 7"),
        "{err}"
    );
    let mut topo = with_clusters();
    let c = topo.clusters.as_mut().unwrap();
    c.contention.as_mut().unwrap().tpcs[0].gpc = Some(2);
    let err = topo.validate().unwrap_err().to_string();
    assert!(err.contains("GPC 2 of 2"), "{err}");
    let mut topo = with_clusters();
    let c = topo.clusters.as_mut().unwrap();
    c.contention.as_mut().unwrap().checks[0].drop_by_gpc.pop();
    let err = topo.validate().unwrap_err().to_string();
    assert!(err.contains("one finite drop per GPC"), "{err}");
}

#[test]
fn the_summary_names_the_sms_placed_by_contention() {
    let lines = render::cluster_lines(&with_clusters());
    assert!(lines[0].contains("SMs [4] by contention"), "{}", lines[0]);
    assert!(lines[0].contains("not told for SMs [5]"), "{}", lines[0]);
}
