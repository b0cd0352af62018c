//! Export in the JSON layout of MT4G v1.x, so sys-sage and other MT4G
//! consumers can read memtopo results.
//!
//! The layout follows MT4G 1.2's output: `general`, `compute`, `memory`
//! (`l1`, `texture`, `readOnly`, `constant.l1`, `constant["l1.5"]`, `shared`,
//! `l2`, `main`) and `meta`. A benchmarked size becomes
//! `{"size", "unit": "bytes", "method": "p-chase", "randomized": false, "confidence"}`,
//! an API value `{"value", "unit"}`, a latency
//! `{"mean", "p50", "p95", "stdev", "measurements", "sampleSize", "method", "unit"}`.
//!
//! - `confidence` carries the statistic behind each value ([`confidence()`]: 1 for the
//!   driver's values, the detector's confidence or agreement share, 1 − p of a test, 0
//!   for a bound or where no statistic was recorded).
//! - `missPenalty` is, as MT4G defines it, the latency of a miss served by the next level
//!   minus this level's hit latency: here the next level's measured latency (the L2 for the
//!   L1, texture and read-only caches, the constant L1.5 for the constant L1, device memory
//!   for the L2, or the level `backed_by` names) minus this one's, written where positive.
//! - `compute.numberOfCoresPerMultiProcessor` and `maxBlocksPerMultiProcessor`, which no
//!   measurement gives, come from the device record or, as MT4G derives them, from the
//!   compute capability.
//! - Every key sys-sage's parser requires is written; where memtopo has no value the key
//!   holds what MT4G writes for a value it could not establish (size 0 with confidence 0, a
//!   latency over 0 samples, 0 for an API value) and `meta.memtopoNotMeasured` lists it
//!   with the reason.
//!
//! What the layout cannot express, and how the export degrades:
//! - bounds: MT4G has no "at least"; a bound is exported as its value with
//!   confidence 0, which is how MT4G itself marks the constant L1.5 size it
//!   cannot bracket (a range exports its lower end);
//! - provenance beyond "p-chase" vs API, test statistics and p-values (folded into the
//!   confidence);
//! - measurement conditions (carveout, measured SM clock) and nanoseconds;
//! - L2 partitions: only `segmentSize` (the size of one) exists; the count and
//!   the near/far latencies are dropped, `latency` is the near one if no
//!   overall L2 latency was measured;
//! - the L1 size per carveout, TLB levels, instruction caches (MT4G has no
//!   instruction-cache object), notes and not-measured reasons (beyond
//!   `meta.memtopoNotMeasured`);
//! - `sampleSize` (samples taken) vs `measurements` (samples kept): memtopo
//!   keeps one count, written to both.

mod confidence;
mod required;

pub use confidence::confidence;

use serde_json::{json, Map, Value};

use crate::model::{Element, ElementKind, Topology};
use crate::quantity::{Latency, Provenance, Size};
use crate::units::Bytes;

fn api_value(value: impl Into<Value>, unit: &str) -> Value {
    json!({ "unit": unit, "value": value.into() })
}

/// A size in a slot where MT4G writes a benchmarked size (`{size, confidence, …}`):
/// the driver's values too, with method `api` and confidence 1.
fn size_value(size: &Size) -> Value {
    let method = match size.provenance {
        Provenance::Api => "api",
        Provenance::Benchmark | Provenance::Derived => "p-chase",
    };
    json!({
        "confidence": confidence(size),
        "method": method,
        "randomized": false,
        "size": size.bound.lower().0,
        "unit": "bytes",
    })
}

/// The level whose hits serve `kind`'s misses: `backed_by` where the result names it,
/// else the hierarchy every NVIDIA GPU memtopo measures has.
fn next_level(kind: ElementKind, element: &Element) -> Option<ElementKind> {
    element.backed_by.or(match kind {
        ElementKind::L1Data | ElementKind::Texture | ElementKind::ReadOnly => Some(ElementKind::L2),
        ElementKind::ConstantL1 => Some(ElementKind::ConstantL15),
        ElementKind::ConstantL15 => Some(ElementKind::L2),
        ElementKind::L2 => Some(ElementKind::DeviceMemory),
        ElementKind::SharedMemory | ElementKind::DeviceMemory => None,
    })
}

fn latency_value(latency: &Latency) -> Value {
    json!({
        "mean": latency.mean.0,
        "measurements": latency.samples,
        "method": "p-chase",
        "p50": latency.p50.0,
        "p95": latency.p95.0,
        "sampleSize": latency.samples,
        "stdev": latency.stdev.0,
        "unit": "cycles",
    })
}

fn bytes_value(bytes: Bytes) -> Value {
    api_value(bytes.0, "bytes")
}

fn mt4g_name(kind: ElementKind) -> &'static str {
    match kind {
        ElementKind::L1Data => "L1",
        ElementKind::Texture => "Texture",
        ElementKind::ReadOnly => "Read Only",
        ElementKind::ConstantL1 => "Constant L1",
        ElementKind::ConstantL15 => "Constant L1.5",
        ElementKind::SharedMemory => "Shared",
        ElementKind::L2 => "L2",
        ElementKind::DeviceMemory => "Main",
    }
}

/// The fields common to MT4G's cache objects.
fn cache_object(topo: &Topology, kind: ElementKind, element: &Element) -> Map<String, Value> {
    let mut object = Map::new();
    // memtopo's own key (schema 1.5): the benchmark stayed disturbed, every value below
    // may be wrong.
    if let Some(reason) = &element.disturbed {
        object.insert("memtopoDisturbed".into(), reason.clone().into());
    }
    if let Some(count) = element.count_per_sm {
        object.insert("amountPerMultiprocessor".into(), count.value.into());
    }
    if let Some(granularity) = &element.fetch_granularity {
        object.insert("fetchGranularity".into(), size_value(granularity));
    }
    let latency = element.latency.as_ref().or_else(|| {
        element
            .partitions
            .as_ref()
            .and_then(|p| p.near_latency.as_ref())
    });
    if let Some(latency) = latency {
        object.insert("latency".into(), latency_value(latency));
        // MT4G's miss penalty: a miss's latency (the next level's) minus a hit's.
        let next = next_level(kind, element)
            .and_then(|next| topo.element(next))
            .and_then(|next| next.latency.as_ref());
        if let Some(penalty) = next.map(|next| next.mean.0 - latency.mean.0) {
            if penalty > 0.0 {
                object.insert("missPenalty".into(), api_value(penalty, "cycles"));
            }
        }
    }
    if let Some(line) = &element.line_size {
        object.insert("lineSize".into(), size_value(line));
    }
    // memtopo's own keys (schema 1.6): MT4G has no place for a cache's organisation.
    if let Some(g) = &element.geometry {
        insert_some(
            &mut object,
            "memtopoSets",
            g.sets.map(|c| api_value(c.value, "sets")),
        );
        insert_some(
            &mut object,
            "memtopoWays",
            g.associativity.map(|c| api_value(c.value, "ways")),
        );
        insert_some(
            &mut object,
            "memtopoSetMapping",
            g.set_mapping.as_ref().map(|m| m.to_string().into()),
        );
        insert_some(
            &mut object,
            "memtopoReplacement",
            g.replacement.as_ref().map(|r| r.to_string().into()),
        );
        insert_some(
            &mut object,
            "memtopoGeometryNotDetermined",
            g.not_determined.clone().map(Into::into),
        );
    }
    let shared = topo.shared_with(kind);
    if !shared.is_empty() {
        // In MT4G's order: sorted by name.
        let mut names: Vec<&str> = shared.iter().map(|k| mt4g_name(*k)).collect();
        names.sort_unstable();
        let names: Vec<Value> = names.into_iter().map(Into::into).collect();
        object.insert("sharedWith".into(), names.into());
    }
    if let Some(size) = &element.size {
        object.insert("size".into(), size_value(size));
    }
    if let Some(bandwidth) = &element.bandwidth {
        if let Some(read) = &bandwidth.read {
            object.insert("readBandwidth".into(), api_value(read.value, "GiB/s"));
        }
        if let Some(write) = &bandwidth.write {
            object.insert("writeBandwidth".into(), api_value(write.value, "GiB/s"));
        }
    }
    object
}

fn insert_some(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object.insert(key.into(), value);
    }
}

/// The topology in MT4G v1.x's JSON layout.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::ConstantL15)
///     .set_size(Size::at_least(Bytes(65_537), Provenance::Benchmark));
/// let doc = mt4g::export(&topo);
/// assert_eq!(doc["memory"]["constant"]["l1.5"]["size"]["size"], 65_537);
/// assert_eq!(doc["memory"]["constant"]["l1.5"]["size"]["confidence"], 0.0);
/// assert_eq!(doc["general"]["computeCapability"]["major"], 9);
/// ```
pub fn export(topo: &Topology) -> Value {
    let d = &topo.device;
    let l = &d.limits;

    let mut compute = Map::new();
    compute.insert("multiProcessorCount".into(), d.sm_count.into());
    let mut derived = Map::new();
    let cc = d.compute_capability;
    let from_cc = |key: &str, value: Option<u32>, derived: &mut Map<String, Value>| {
        let reason = match value {
            Some(_) => format!("derived from the compute capability {cc}, as MT4G derives it"),
            None => format!("not reported, and the compute capability {cc} is not in the table"),
        };
        derived.insert(format!("compute.{key}"), reason.into());
        value.unwrap_or(0)
    };
    let blocks = match l.max_blocks_per_sm {
        Some(blocks) => blocks,
        None => from_cc(
            "maxBlocksPerMultiProcessor",
            confidence::max_blocks_per_sm(cc),
            &mut derived,
        ),
    };
    compute.insert("maxBlocksPerMultiProcessor".into(), blocks.into());
    insert_some(
        &mut compute,
        "maxThreadsPerBlock",
        l.max_threads_per_block.map(Into::into),
    );
    insert_some(
        &mut compute,
        "maxThreadsPerMultiProcessor",
        l.max_threads_per_sm.map(Into::into),
    );
    let cores = match d.cores_per_sm {
        Some(cores) => cores,
        None => from_cc(
            "numberOfCoresPerMultiProcessor",
            confidence::cores_per_sm(cc),
            &mut derived,
        ),
    };
    compute.insert("numberOfCoresPerMultiProcessor".into(), cores.into());
    insert_some(
        &mut compute,
        "regsPerBlock",
        l.registers_per_block.map(Into::into),
    );
    insert_some(
        &mut compute,
        "regsPerMultiProcessor",
        l.registers_per_sm.map(Into::into),
    );
    insert_some(&mut compute, "warpSize", l.warp_size.map(Into::into));

    let mut general = Map::new();
    // MT4G reports clocks as integer kHz.
    insert_some(
        &mut general,
        "clockRate",
        d.sm_clock_mhz
            .map(|c| api_value((c.0 * 1000.0).round() as u64, "kHz")),
    );
    general.insert(
        "computeCapability".into(),
        json!({ "major": d.compute_capability.major, "minor": d.compute_capability.minor }),
    );
    general.insert("name".into(), d.name.clone().into());
    general.insert("vendor".into(), "NVIDIA".into());

    let mut memory = Map::new();
    let plain = [
        (ElementKind::L1Data, "l1"),
        (ElementKind::Texture, "texture"),
        (ElementKind::ReadOnly, "readOnly"),
    ];
    for (kind, key) in plain {
        if let Some(element) = topo.element(kind) {
            let mut object = cache_object(topo, kind, element);
            if kind == ElementKind::L1Data {
                insert_some(
                    &mut object,
                    "globalL1CacheSupported",
                    element.global_loads_cached.map(Into::into),
                );
            }
            memory.insert(key.into(), object.into());
        }
    }

    let mut constant = Map::new();
    if let Some(element) = topo.element(ElementKind::ConstantL1) {
        constant.insert(
            "l1".into(),
            cache_object(topo, ElementKind::ConstantL1, element).into(),
        );
    }
    if let Some(element) = topo.element(ElementKind::ConstantL15) {
        let mut object = cache_object(topo, ElementKind::ConstantL15, element);
        // MT4G's L1.5 object has neither a per-SM count, a line size nor a miss penalty.
        for key in ["amountPerMultiprocessor", "lineSize", "missPenalty"] {
            object.remove(key);
        }
        constant.insert("l1.5".into(), object.into());
    }
    insert_some(
        &mut constant,
        "totalConstMem",
        l.total_constant_memory_bytes.map(bytes_value),
    );
    if !constant.is_empty() {
        memory.insert("constant".into(), constant.into());
    }

    let mut shared = Map::new();
    if let Some(latency) = topo
        .element(ElementKind::SharedMemory)
        .and_then(|e| e.latency.as_ref())
    {
        shared.insert("latency".into(), latency_value(latency));
    }
    if let Some(reason) = topo
        .element(ElementKind::SharedMemory)
        .and_then(|e| e.disturbed.as_ref())
    {
        shared.insert("memtopoDisturbed".into(), reason.clone().into());
    }
    insert_some(
        &mut shared,
        "reservedSharedMemPerBlock",
        l.reserved_shared_memory_per_block_bytes.map(bytes_value),
    );
    insert_some(
        &mut shared,
        "sharedMemPerBlock",
        l.shared_memory_per_block_bytes.map(bytes_value),
    );
    let per_sm = l.shared_memory_per_sm_bytes.or_else(|| {
        topo.element(ElementKind::SharedMemory)?
            .size
            .as_ref()?
            .bound
            .exact()
    });
    insert_some(
        &mut shared,
        "sharedMemPerMultiProcessor",
        per_sm.map(bytes_value),
    );
    if !shared.is_empty() {
        memory.insert("shared".into(), shared.into());
    }

    let mut l2 = topo
        .element(ElementKind::L2)
        .map(|e| cache_object(topo, ElementKind::L2, e))
        .unwrap_or_default();
    l2.remove("amountPerMultiprocessor");
    // MT4G writes the L2 total as an API value.
    let total = d
        .l2_bytes
        .or_else(|| topo.element(ElementKind::L2)?.size.as_ref()?.bound.exact());
    if let Some(total) = total {
        l2.insert("size".into(), bytes_value(total));
    }
    insert_some(
        &mut l2,
        "persistingL2CacheMaxSize",
        l.persisting_l2_max_bytes.map(bytes_value),
    );
    if let Some(each) = topo.l2_partitions().and_then(|p| p.size_each.as_ref()) {
        l2.insert("segmentSize".into(), size_value(each));
    }
    if !l2.is_empty() {
        memory.insert("l2".into(), l2.into());
    }

    let mut main = topo
        .element(ElementKind::DeviceMemory)
        .map(|e| cache_object(topo, ElementKind::DeviceMemory, e))
        .unwrap_or_default();
    main.remove("size");
    main.remove("amountPerMultiprocessor");
    insert_some(
        &mut main,
        "memoryBusWidth",
        d.memory_bus_width_bits.map(|b| api_value(b, "bit")),
    );
    insert_some(
        &mut main,
        "memoryClockRate",
        d.memory_clock_mhz
            .map(|c| api_value((c.0 * 1000.0).round() as u64, "kHz")),
    );
    insert_some(&mut main, "totalGlobalMem", d.memory_bytes.map(bytes_value));
    if !main.is_empty() {
        memory.insert("main".into(), main.into());
    }

    let mut meta = Map::new();
    insert_some(
        &mut meta,
        "driver",
        d.cuda_driver_api_version.map(Into::into),
    );
    insert_some(&mut meta, "runtime", d.cuda_runtime_version.map(Into::into));
    insert_some(
        &mut meta,
        "timestamp",
        topo.conditions.date.clone().map(Into::into),
    );

    // MT4G has no place for run conditions or warnings; a reader that knows the key
    // finds them, one that does not ignores it.
    if let Some(run) = &topo.run {
        let mut memtopo = Map::new();
        memtopo.insert("busy".into(), run.busy.into());
        if let Some(banner) = crate::render::busy_banner(topo) {
            memtopo.insert("warning".into(), banner.into());
        }
        insert_some(
            &mut memtopo,
            "gpuUuid",
            run.gpu_uuid.clone().map(Into::into),
        );
        insert_some(
            &mut memtopo,
            "pciBusId",
            run.pci_bus_id.clone().map(Into::into),
        );
        insert_some(&mut memtopo, "host", run.host.clone().map(Into::into));
        insert_some(
            &mut memtopo,
            "dateUtc",
            run.date_utc.clone().map(Into::into),
        );
        meta.insert("memtopoRun".into(), memtopo.into());
    }
    let mut document = Map::new();
    document.insert("compute".into(), compute.into());
    document.insert("general".into(), general.into());
    document.insert("memory".into(), memory.into());
    let mut filled = required::fill(&mut document);
    filled.extend(derived);
    if !filled.is_empty() {
        meta.insert("memtopoNotMeasured".into(), filled.into());
    }
    document.insert("meta".into(), meta.into());
    Value::Object(document)
}

/// [`export`] as pretty-printed JSON text (four-space indent, as MT4G writes).
pub fn export_string(topo: &Topology) -> String {
    let mut buffer = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut buffer, formatter);
    // Serialising a `Value` into memory cannot fail.
    serde::Serialize::serialize(&export(topo), &mut serializer)
        .expect("serialising a JSON value into a Vec cannot fail");
    let mut text = String::from_utf8(buffer).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}
