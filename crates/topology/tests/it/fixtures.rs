//! Topologies the tests share: an illustrative H200-like result (the source of
//! `examples/data/h200-illustrative.*`) and a Kepler K20c built from the
//! thesis' table 5.4 with one failed benchmark.

use std::path::PathBuf;

use topology::*;

/// `crates/topology/tests/it/golden/`.
pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden")
}

/// `examples/data/` of this crate.
pub fn results_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data")
}

/// `crates/topology/schema/topology.schema.json`, the schema published with the crate.
pub fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/topology.schema.json")
}

/// The copies of a published schema file `name`: the crate's and `docs/schema/`'s.
pub fn schema_copies(name: &str) -> [PathBuf; 2] {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        crate_dir.join("schema").join(name),
        crate_dir.join("../../docs/schema").join(name),
    ]
}

/// Compares `actual` with the committed file `path`; with `MEMTOPO_BLESS=1`
/// in the environment, rewrites the file instead.
pub fn check_golden_file(path: PathBuf, actual: &str) {
    if std::env::var_os("MEMTOPO_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("golden files live in a folder")).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `MEMTOPO_BLESS=1 cargo test -p topology` to create it",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the rendered output; if the change is intended, run \
         `MEMTOPO_BLESS=1 cargo test -p topology`\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

/// Compares with `tests/it/golden/<name>`.
pub fn check_golden(name: &str, actual: &str) {
    check_golden_file(golden_dir().join(name), actual);
}

/// A latency as results before schema 1.4 hold it: no quartiles.
pub fn latency(mean: f64, p50: f64, p95: f64, stdev: f64, samples: u32) -> Latency {
    Latency::measured(LatencySummary {
        mean: Cycles(mean),
        p25: None,
        p50: Cycles(p50),
        p75: None,
        p95: Cycles(p95),
        stdev: Cycles(stdev),
        samples,
    })
}

/// A latency with its quartiles (schema 1.4): `[p25, p50, p75, p95]`.
pub fn latency_q(mean: f64, q: [f64; 4], stdev: f64, samples: u32) -> Latency {
    Latency::measured(LatencySummary {
        mean: Cycles(mean),
        p25: Some(Cycles(q[0])),
        p50: Cycles(q[1]),
        p75: Some(Cycles(q[2])),
        p95: Cycles(q[3]),
        stdev: Cycles(stdev),
        samples,
    })
}

fn change_point(bytes: u64, confidence: f64, p_value: f64, statistic: f64) -> Size {
    Size::measured(
        Bytes(bytes),
        ChangePointEvidence {
            method: Some("pelt+ks2".into()),
            statistic: Some(statistic),
            p_value: Some(p_value),
            confidence: Some(confidence),
            resolution: Some(Bytes(256)),
        },
    )
}

fn benchmark(bytes: u64) -> Size {
    Size::exact(Bytes(bytes), Provenance::Benchmark)
}

/// An H200-like topology. Illustrative: modelled on MT4G's H100 sample and the
/// H200's published figures, not measured.
pub fn h200_illustrative() -> Topology {
    let mut device = DeviceInfo::new(
        "NVIDIA H200 (illustrative)",
        ComputeCapability::new(9, 0),
        132,
    );
    device.cores_per_sm = Some(128);
    device.sm_clock_mhz = Some(Megahertz(1980.0));
    device.memory_clock_mhz = Some(Megahertz(3201.0));
    device.memory_bytes = Some(Bytes(150_754_820_096));
    device.memory_bus_width_bits = Some(6144);
    device.l2_bytes = Some(Bytes::mib(50));
    device.driver_version = Some("550.54.15".into());
    device.cuda_driver_api_version = Some(12040);
    device.cuda_runtime_version = Some(12040);
    device.limits = Limits {
        shared_memory_per_sm_bytes: Some(Bytes(233_472)),
        shared_memory_per_block_bytes: Some(Bytes(49_152)),
        shared_memory_per_block_optin_bytes: Some(Bytes(232_448)),
        reserved_shared_memory_per_block_bytes: Some(Bytes(1024)),
        total_constant_memory_bytes: Some(Bytes(65_536)),
        persisting_l2_max_bytes: Some(Bytes(39_321_600)),
        registers_per_sm: Some(65_536),
        registers_per_block: Some(65_536),
        max_threads_per_sm: Some(2048),
        max_threads_per_block: Some(1024),
        max_blocks_per_sm: Some(32),
        warp_size: Some(32),
    };
    let mut topo = Topology::new(device);
    topo.conditions = Conditions {
        shared_memory_carveout_percent: Some(0),
        sm_clock_mhz: Some(Megahertz(1755.0)),
        date: Some("2026-01-15T10:00:00Z".into()),
        tool: Some("memtopo (illustrative example, not a measurement)".into()),
        tool_version: Some("0.1.0".into()),
        remark: Some(
            "Illustrative example, not a measurement: values modelled on MT4G's H100 sample."
                .into(),
        ),
    };

    topo.element_mut(ElementKind::L1Data)
        .set_size(change_point(238_848, 0.97, 1e-6, 0.81))
        .set_line_size(benchmark(128))
        .set_fetch_granularity(benchmark(32))
        .set_latency(latency_q(38.2, [37.5, 38.0, 38.5, 39.0], 0.6, 256))
        .set_count_per_sm(Count::new(1, Provenance::Benchmark))
        .set_backed_by(ElementKind::L2)
        .set_global_loads_cached(true)
        .set_size_at_carveout(CarveoutL1Size {
            carveout_percent: Some(0),
            shared_memory_bytes: Some(Bytes(8192)),
            kernel_shared_bytes: Some(Bytes(7168)),
            role: Some(CarveoutRole::LargestL1),
            l1_size: change_point(238_848, 0.97, 1e-6, 0.81),
        })
        .set_size_at_carveout(CarveoutL1Size {
            carveout_percent: Some(100),
            shared_memory_bytes: Some(Bytes(233_472)),
            kernel_shared_bytes: None,
            role: Some(CarveoutRole::Configuration),
            l1_size: change_point(22_784, 0.95, 1e-5, 0.77).with_conditions(Conditions {
                shared_memory_carveout_percent: Some(100),
                ..Default::default()
            }),
        });
    topo.element_mut(ElementKind::Texture)
        .set_size(change_point(243_456, 0.97, 2e-6, 0.79))
        .set_line_size(benchmark(128))
        .set_fetch_granularity(benchmark(32))
        .set_latency(latency_q(38.8, [38.8, 42.0, 42.0, 42.0], 5.8, 256))
        .set_count_per_sm(Count::new(1, Provenance::Benchmark))
        .set_backed_by(ElementKind::L2);
    topo.element_mut(ElementKind::ReadOnly)
        .set_size(change_point(238_848, 0.97, 1e-6, 0.80))
        .set_line_size(benchmark(128))
        .set_fetch_granularity(benchmark(32))
        .set_latency(latency_q(34.9, [33.5, 34.0, 37.3, 44.0], 2.5, 256))
        .set_count_per_sm(Count::new(1, Provenance::Benchmark))
        .set_backed_by(ElementKind::L2);
    topo.share_physical_cache(
        [
            ElementKind::L1Data,
            ElementKind::Texture,
            ElementKind::ReadOnly,
        ],
        Provenance::Benchmark,
    );
    topo.element_mut(ElementKind::ConstantL1)
        .set_size(change_point(2112, 0.90, 1e-3, 0.55))
        .set_line_size(benchmark(64))
        .set_fetch_granularity(benchmark(64))
        .set_latency(latency_q(20.7, [16.5, 17.0, 36.7, 76.0], 14.3, 256))
        .set_count_per_sm(Count::new(1, Provenance::Benchmark))
        .set_backed_by(ElementKind::ConstantL15);
    topo.element_mut(ElementKind::ConstantL15)
        .set_size(Size::at_least(Bytes::kib(64), Provenance::Benchmark))
        .set_line_size(benchmark(256))
        .set_fetch_granularity(benchmark(256))
        .set_latency(latency_q(104.9, [104.9, 106.0, 106.0, 106.0], 8.7, 127))
        .set_backed_by(ElementKind::L2);
    topo.element_mut(ElementKind::SharedMemory)
        .set_size(Size::api(Bytes(233_472)))
        .set_latency(latency_q(29.9, [29.5, 30.0, 30.0, 30.0], 0.5, 256))
        .set_count_per_sm(Count::new(1, Provenance::Api));
    let l2 = topo.element_mut(ElementKind::L2);
    l2.set_size(Size::api(Bytes::mib(50)))
        .set_line_size(benchmark(128))
        .set_fetch_granularity(benchmark(32))
        .set_latency(latency_q(219.3, [219.3, 222.0, 225.0, 231.0], 11.6, 256))
        .set_backed_by(ElementKind::DeviceMemory);
    l2.bandwidth_mut().read = Some(Bandwidth::gib_per_second(4528.9, Provenance::Benchmark));
    l2.bandwidth_mut().write = Some(Bandwidth::gib_per_second(3494.6, Provenance::Benchmark));
    *l2.partitions_mut() = L2Partitions {
        count: Some(Count::new(2, Provenance::Derived)),
        size_each: Some(change_point(26_214_400, 0.93, 1e-4, 0.68)),
        near_latency: Some(latency_q(219.3, [219.3, 222.0, 225.0, 231.0], 11.6, 256)),
        far_latency: Some(latency_q(392.5, [392.5, 394.0, 399.3, 410.0], 14.2, 256)),
        far_size: Some(Size::exact(Bytes(24_117_248), Provenance::Benchmark)),
        near_keeps_far_copies: Some(true),
        sm_partition: (0..8).map(|sm| Some(u32::from(sm % 4 >= 2))).collect(),
        map_reference_sm: Some(0),
        ..Default::default()
    };
    let dram = topo.element_mut(ElementKind::DeviceMemory);
    dram.set_size(Size::api(Bytes(150_754_820_096)))
        .set_latency(latency_q(834.5, [834.5, 864.0, 951.5, 1126.4], 140.5, 2047));
    // Schema 1.5: the launch that reached it and the API's peak (3201 MHz × 6144 bit × 2).
    let mut read = Bandwidth::gib_per_second(4310.0, Provenance::Benchmark)
        .with_launch(BandwidthLaunch {
            blocks_per_sm: 2,
            threads_per_block: 1024,
            vector_bytes: 16,
            unroll: 4,
            instruction: "ld.global.cg".into(),
        })
        .with_peak(BandwidthPeak::from_bytes_per_second(
            3.201e9 * 768.0 * 2.0,
            "memory clock × bus width × 2, from the driver API",
        ));
    read.median = Some(4301.5);
    read.repetitions = Some(5);
    read.working_set = Some(Bytes(512 << 20));
    dram.bandwidth_mut().read = Some(read);
    dram.bandwidth_mut().write = Some(Bandwidth::gib_per_second(4105.0, Provenance::Benchmark));
    topo.warn(
        Some(ElementKind::L1Data),
        "the L1 starts missing before it is full (Volta+ replacement), so its size may read 6–8 KiB low",
    );
    topo.not_measured(
        ElementKind::L2,
        Some(QuantityKind::Geometry),
        "associativity benchmarks are not implemented yet",
    );
    topo
}

/// The Tesla K20c of the thesis' table 5.4, with the constant L1.5 latency
/// benchmark failing (as a run might) to show "not measured".
pub fn k20c_partial() -> Topology {
    let mut device = DeviceInfo::new("Tesla K20c", ComputeCapability::new(3, 5), 13);
    device.sm_clock_mhz = Some(Megahertz(706.0));
    device.memory_bytes = Some(Bytes(4_974_575_616));
    device.l2_bytes = Some(Bytes(1_310_720));
    let mut topo = Topology::new(device);
    topo.conditions.tool = Some("thesis table 5.4".into());
    topo.element_mut(ElementKind::L1Data)
        .set_size(benchmark(16_524))
        .set_line_size(benchmark(128))
        .set_latency(latency(64.0, 64.0, 66.0, 1.0, 256))
        .set_count_per_sm(Count::new(1, Provenance::Benchmark))
        .set_global_loads_cached(true);
    topo.element_mut(ElementKind::Texture)
        .set_size(benchmark(12_300))
        .set_line_size(benchmark(32))
        .set_latency(latency(111.0, 111.0, 114.0, 1.5, 256))
        .set_count_per_sm(Count::new(4, Provenance::Benchmark));
    topo.element_mut(ElementKind::ReadOnly)
        .set_size(benchmark(12_420))
        .set_line_size(benchmark(32))
        .set_latency(latency(130.0, 130.0, 133.0, 1.5, 256))
        .set_count_per_sm(Count::new(4, Provenance::Benchmark));
    topo.share_physical_cache(
        [ElementKind::Texture, ElementKind::ReadOnly],
        Provenance::Benchmark,
    );
    topo.element_mut(ElementKind::ConstantL1)
        .set_size(benchmark(1872))
        .set_line_size(benchmark(64))
        .set_latency(latency(50.0, 50.0, 52.0, 0.8, 256))
        .set_count_per_sm(Count::new(4, Provenance::Benchmark));
    topo.element_mut(ElementKind::ConstantL15)
        .set_size(benchmark(33_600))
        .set_line_size(benchmark(256));
    topo.not_measured(
        ElementKind::ConstantL15,
        Some(QuantityKind::Latency),
        "kernel launch failed: too many resources requested",
    );
    topo.element_mut(ElementKind::SharedMemory)
        .set_size(Size::api(Bytes::kib(48)))
        .set_latency(latency(47.0, 47.0, 47.0, 0.0, 256));
    topo.element_mut(ElementKind::L2)
        .set_size(Size::api(Bytes(1_310_720)))
        .set_line_size(benchmark(32))
        .set_latency(latency(223.0, 223.0, 230.0, 3.0, 256));
    topo.element_mut(ElementKind::DeviceMemory)
        .set_size(Size::api(Bytes(4_974_575_616)))
        .set_latency(latency(339.0, 339.0, 360.0, 8.0, 256));
    topo
}
