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
                sms: vec![0, 2],
                l2_partitions: vec![0],
                dsmem_p50: Some(Cycles(190.0)),
            },
            Gpc {
                sms: vec![1, 3],
                l2_partitions: vec![],
                dsmem_p50: None,
            },
        ],
        unassigned_sms: vec![5],
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
