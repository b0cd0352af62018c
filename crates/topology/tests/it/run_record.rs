//! The run record (schema 1.3): stored, rendered in every format, validated, diffed.

use topology::*;

fn topo_with(run: RunRecord) -> Topology {
    let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
    topo.element_mut(ElementKind::L2)
        .set_size(Size::api(Bytes::mib(50)));
    topo.run = Some(run);
    topo
}

fn record() -> RunRecord {
    RunRecord {
        date_utc: Some("2026-11-25T09:00:00Z".into()),
        host: Some("node17".into()),
        tool_version: Some("0.1.0".into()),
        git_commit: Some("abc1234".into()),
        command_line: vec!["memtopo".into(), "-o".into(), "x.json".into()],
        gpu_uuid: Some("GPU-8d3e1a52-0b7c-4f10-9e61-0011223344ff".into()),
        pci_bus_id: Some("0000:65:00.0".into()),
        driver_version: Some("550.54.15".into()),
        cuda_driver_version: Some(12040),
        before: Some(GpuState {
            sm_clock_mhz: Some(1980),
            temperature_c: Some(41),
            ecc_enabled: Some(true),
            compute_mode: Some("default".into()),
            ..GpuState::default()
        }),
        after: Some(GpuState {
            sm_clock_mhz: Some(1980),
            temperature_c: Some(47),
            ecc_enabled: Some(true),
            compute_mode: Some("default".into()),
            ..GpuState::default()
        }),
        lock: Some("held".into()),
        ..RunRecord::default()
    }
}

#[test]
fn the_record_round_trips_through_json_and_toml() {
    let topo = topo_with(record());
    let json = topo.to_json_string().unwrap();
    let current = format!("\"schema_version\": \"{}\"", SchemaVersion::CURRENT);
    assert!(json.contains(&current), "{json}");
    assert_eq!(Topology::from_json_str(&json).unwrap(), topo);
    let toml = topo.to_toml_string().unwrap();
    assert_eq!(Topology::from_toml_str(&toml).unwrap(), topo);
}

#[test]
fn a_1_2_document_without_a_record_still_loads() {
    let topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
    let json = topo
        .to_json_string()
        .unwrap()
        .replace(&format!("\"{}\"", SchemaVersion::CURRENT), "\"1.2\"");
    let back = Topology::from_json_str(&json).unwrap();
    assert_eq!(back.run, None);
    assert_eq!(back.schema_version, SchemaVersion { major: 1, minor: 2 });
}

#[test]
fn a_busy_result_says_so_in_every_output() {
    let mut run = record();
    run.mark_busy("pid 4711 (python3, compute) uses the GPU");
    run.other_processes.push(GpuProcess {
        pid: 4711,
        name: Some("python3".into()),
        kind: "compute".into(),
        used_memory_bytes: Some(1 << 30),
    });
    let topo = topo_with(run);
    let table = render::table(&topo);
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .contains("TAKEN ON A BUSY GPU"),
        "{table}"
    );
    assert!(table.contains("pid 4711 (python3, compute)"), "{table}");
    let md = render::markdown(&topo);
    assert!(md.contains("> **WARNING: TAKEN ON A BUSY GPU"), "{md}");
    assert!(md.contains("| busy | true |"), "{md}");
    assert!(render::svg(&topo).contains("TAKEN ON A BUSY GPU"));
    let mt4g = mt4g::export(&topo);
    assert_eq!(mt4g["meta"]["memtopoRun"]["busy"], true);
    assert!(mt4g["meta"]["memtopoRun"]["warning"]
        .as_str()
        .unwrap()
        .contains("pid 4711"));
    let json = topo.to_json_string().unwrap();
    assert!(json.contains("\"busy\": true"), "{json}");
}

#[test]
fn a_clean_result_has_no_banner_but_lists_its_conditions() {
    let topo = topo_with(record());
    let table = render::table(&topo);
    assert!(!table.contains("WARNING"), "{table}");
    assert!(table.contains("GPU: GPU-8d3e1a52"), "{table}");
    assert!(table.contains("temperature 41 °C → 47 °C"), "{table}");
    assert!(table.contains("SM clock 1980 MHz"), "{table}");
    let md = render::markdown(&topo);
    assert!(md.contains("| pci_bus_id | 0000:65:00.0 |"), "{md}");
    assert!(md.contains("| command_line | memtopo -o x.json |"), "{md}");
}

#[test]
fn diff_lists_condition_differences_apart_from_changes() {
    let a = topo_with(record());
    let mut run = record();
    run.driver_version = Some("560.28.03".into());
    run.after.as_mut().unwrap().sm_clock_mhz = Some(1410);
    run.host = Some("node18".into());
    let b = topo_with(run);
    let d = diff::diff(&a, &b);
    assert!(d.is_empty(), "the topology itself did not change");
    let paths: Vec<&str> = d.conditions.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        ["run.host", "run.driver_version", "run.after.sm_clock_mhz"]
    );
    let text = d.to_string();
    assert!(
        text.contains("run.driver_version: 550.54.15 → 560.28.03"),
        "{text}"
    );
    assert!(diff::diff(&a, &a).conditions.is_empty());
    // One side without a record: every field it has is a difference.
    let bare = Topology {
        run: None,
        ..a.clone()
    };
    assert!(diff::diff(&bare, &a)
        .conditions
        .iter()
        .any(|c| c.path == "run.gpu_uuid" && c.before == "-"));
}

#[test]
fn validation_checks_the_record() {
    let mut run = record();
    run.busy = true;
    run.date_utc = Some("yesterday".into());
    let err = topo_with(run).validate().unwrap_err().to_string();
    assert!(err.contains("run.date_utc"), "{err}");
    assert!(err.contains("run.busy_reasons"), "{err}");
}

/// Schema 1.7: the memory's temperature and remapped rows, which tell a GPU whose memory is
/// slower than its model's, reach every output and the diff.
#[test]
fn the_memory_conditions_are_recorded_shown_and_diffed() {
    let mut run = record();
    for (state, temperature) in [(&mut run.before, 38), (&mut run.after, 44)] {
        let state = state.as_mut().unwrap();
        state.memory_temperature_c = Some(temperature);
        state.remapped_rows = Some([2, 0]);
        state.row_remap_pending = Some(false);
    }
    let topo = topo_with(run.clone());
    let json = topo.to_json_string().unwrap();
    assert!(json.contains("\"memory_temperature_c\": 38"), "{json}");
    assert_eq!(Topology::from_json_str(&json).unwrap(), topo);
    let table = render::table(&topo);
    assert!(
        table.contains("memory temperature 38 °C → 44 °C"),
        "{table}"
    );
    assert!(
        table.contains("remapped rows (correctable, uncorrectable) 2, 0"),
        "{table}"
    );
    assert!(table.contains("row remap pending no"), "{table}");
    let md = render::markdown(&topo);
    assert!(md.contains("| after.remapped_rows | 2,0 |"), "{md}");
    // A row remapped between two runs is a condition that changed, not the topology.
    run.after.as_mut().unwrap().remapped_rows = Some([3, 0]);
    let d = diff::diff(&topo, &topo_with(run));
    assert!(d.is_empty());
    let paths: Vec<&str> = d.conditions.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["run.after.remapped_rows"]);
}

/// Schema 1.9: the GPUs measured at the same time, shown, kept through both formats, and a
/// condition (not a change) in a diff against the same GPU measured alone.
#[test]
fn the_gpus_measured_at_the_same_time_are_recorded_shown_and_diffed() {
    let alone = topo_with(record());
    let mut run = record();
    run.concurrent_with = vec!["GPU-1".into(), "GPU-2".into()];
    let together = topo_with(run);
    let json = together.to_json_string().unwrap();
    assert!(json.contains("\"concurrent_with\": ["), "{json}");
    assert_eq!(Topology::from_json_str(&json).unwrap(), together);
    let toml = together.to_toml_string().unwrap();
    assert_eq!(Topology::from_toml_str(&toml).unwrap(), together);
    assert!(!alone.to_json_string().unwrap().contains("concurrent_with"));
    let table = render::table(&together);
    assert!(
        table.contains("measured at the same time as 2 other GPU(s): GPU-1, GPU-2"),
        "{table}"
    );
    assert!(!render::table(&alone).contains("at the same time"));
    let md = render::markdown(&together);
    assert!(md.contains("| concurrent_with | GPU-1, GPU-2 |"), "{md}");
    let d = diff::diff(&alone, &together);
    assert!(d.is_empty(), "the topology itself did not change");
    let paths: Vec<&str> = d.conditions.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["run.concurrent_with"]);
}
