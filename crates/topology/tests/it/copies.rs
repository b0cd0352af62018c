//! The copies section of schema 1.6: it round-trips through JSON and TOML, older files load
//! without it, validation names what is wrong, the renderers show it and diff compares it.

use topology::*;

fn size(bytes: u64, p50: f64, rate: f64) -> CopyAtSize {
    let summary =
        LatencySummary::from_samples(&[p50 - 2.0, p50, p50, p50 + 1.0, p50 + 9.0]).unwrap();
    CopyAtSize {
        bytes: Bytes(bytes),
        tile: None,
        latency: Some(Latency::measured(summary)),
        latency_p5: Some(Cycles(p50 - 2.0)),
        bytes_per_clock_per_sm: Some(rate),
        gigabytes_per_second: Some(rate * 132.0 * 1.755),
        launch: Some(CopyLaunch {
            blocks_per_sm: 6,
            threads_per_block: 32,
            copies_in_flight: 8,
        }),
    }
}

fn with_copies() -> Topology {
    let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
    let mut tile = size(4096, 640.0, 30.0);
    tile.tile = Some([32, 32]);
    topo.copies_to_shared = Some(CopiesToShared {
        source: Some("the L2".into()),
        paths: vec![
            CopyPathResult {
                path: CopyPathKind::Bulk,
                sizes: vec![size(128, 520.0, 20.0), size(4096, 580.0, 36.0)],
            },
            CopyPathResult {
                path: CopyPathKind::CpAsyncCg16,
                sizes: vec![size(128, 400.0, 15.0), size(4096, 480.0, 33.0)],
            },
            CopyPathResult {
                path: CopyPathKind::BulkTensor2d,
                sizes: vec![tile],
            },
        ],
        not_applicable: vec![],
    });
    topo
}

#[test]
fn the_section_round_trips_and_older_files_load_without_it() {
    let topo = with_copies();
    topo.validate().unwrap();
    let json = topo.to_json_string().unwrap();
    assert!(json.contains("\"copies_to_shared\""));
    assert!(json.contains("\"cp_async_cg_16\""));
    // Every path is spelled in the file as its key.
    for kind in CopyPathKind::ALL {
        let mut one = with_copies();
        one.copies_to_shared.as_mut().unwrap().paths[0].path = kind;
        if kind == CopyPathKind::CpAsyncCg16 || kind == CopyPathKind::BulkTensor2d {
            continue; // measured twice then
        }
        let text = one.to_json_string().unwrap();
        assert!(
            text.contains(&format!("\"{}\"", kind.key())),
            "{}",
            kind.key()
        );
    }
    assert_eq!(Topology::from_json_str(&json).unwrap(), topo);
    assert_eq!(
        Topology::from_toml_str(&topo.to_toml_string().unwrap()).unwrap(),
        topo
    );
    let bare = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
    let old = bare.to_json_string().unwrap().replace("\"1.6\"", "\"1.5\"");
    assert!(Topology::from_json_str(&old)
        .unwrap()
        .copies_to_shared
        .is_none());
}

#[test]
fn validation_names_the_bad_field() {
    let broken = |change: fn(&mut CopiesToShared)| {
        let mut topo = with_copies();
        change(topo.copies_to_shared.as_mut().unwrap());
        topo.validate().unwrap_err().to_string()
    };
    let err = broken(|c| c.paths[0].sizes[0].latency_p5 = Some(Cycles(900.0)));
    assert!(
        err.contains("latency_p5") && err.contains("above the median"),
        "{err}"
    );
    let err = broken(|c| c.paths[0].sizes[1].bytes_per_clock_per_sm = Some(-1.0));
    assert!(err.contains("bytes_per_clock_per_sm"), "{err}");
    let err = broken(|c| c.paths[0].sizes.swap(0, 1));
    assert!(err.contains("ascend"), "{err}");
    let err = broken(|c| c.paths[2].sizes[0].tile = Some([16, 16]));
    assert!(err.contains("tile"), "{err}");
    let err = broken(|c| {
        c.not_applicable.push(CopyNotApplicable {
            path: CopyPathKind::Bulk,
            reason: "no".into(),
        })
    });
    assert!(err.contains("not applicable"), "{err}");
    let err = broken(|c| {
        let l = c.paths[1].sizes[0].latency.as_mut().unwrap();
        l.p95 = Cycles(l.p50.0 - 1.0);
    });
    assert!(
        err.contains("copies_to_shared.paths[1].sizes[0].latency"),
        "{err}"
    );
}

#[test]
fn renderers_show_each_path_and_the_winners() {
    let topo = with_copies();
    let table = render::table(&topo);
    let bulk = table
        .lines()
        .find(|l| l.starts_with("TMA bulk") && l.contains("4 KiB"))
        .expect("bulk row");
    assert!(
        bulk.contains("bandwidth") && !bulk.contains("latency,"),
        "{bulk}"
    );
    let cg = table
        .lines()
        .find(|l| l.starts_with("cp.async.cg 16B") && l.contains("128 B"))
        .expect("cg row");
    assert!(cg.contains("latency"), "{cg}");
    assert!(table.contains("4 KiB (32x32)"), "{table}");
    let md = render::markdown(&topo);
    assert!(md.contains("## Copies from global to shared memory"));
    let html = render::html(&topo, None);
    assert!(html.contains("<h2>Copies from global to shared memory</h2>"));
}

#[test]
fn diff_sees_latency_and_bandwidth_moves_beyond_the_noise() {
    let a = with_copies();
    assert!(diff::diff(&a, &a).is_empty());
    let mut b = with_copies();
    let c = b.copies_to_shared.as_mut().unwrap();
    c.paths[0].sizes[1] = size(4096, 700.0, 36.5);
    c.paths[1].sizes[1].bytes_per_clock_per_sm = Some(20.0);
    let d = diff::diff(&a, &b);
    let paths: Vec<&str> = d.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "copies_to_shared.cp_async_cg_16.4096.bytes_per_clock_per_sm",
            "copies_to_shared.bulk.4096.latency"
        ]
    );
    // 36 -> 36.5 B/clk/SM is noise.
    assert!(d.within_uncertainty >= 1);
    let mut c = with_copies();
    let section = c.copies_to_shared.as_mut().unwrap();
    section.paths.remove(0);
    section.not_applicable.push(CopyNotApplicable {
        path: CopyPathKind::Bulk,
        reason: "not applicable: needs 9.0".into(),
    });
    let d = diff::diff(&a, &c);
    assert!(d
        .changes
        .iter()
        .any(|ch| ch.path == "copies_to_shared.bulk.not_applicable"));
}
