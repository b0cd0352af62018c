//! The keys MT4G's consumers require, filled where memtopo has no value.
//!
//! sys-sage's MT4G parser (`src/parsers/mt4g.cpp`, `ParseMt4g_v1_x`) reads some keys
//! unconditionally; a missing one aborts it. Where memtopo measured nothing for such a key
//! the export writes what MT4G writes for a value it could not establish: a size of 0 with
//! `confidence` 0, a latency of 0 cycles over 0 samples, an API value or bandwidth of 0;
//! and it lists every key it filled so under `meta.memtopoNotMeasured` (key → why).

use serde_json::{json, Map, Value};

/// What a filled key stands for.
#[derive(Clone, Copy)]
enum Kind {
    /// A benchmarked size (`{size, unit, confidence, …}`).
    Size,
    /// A latency summary.
    Latency,
    /// An API value `{value, unit}` with this unit.
    Api(&'static str),
}

fn placeholder(kind: Kind) -> Value {
    match kind {
        Kind::Size => json!({
            "confidence": 0.0,
            "method": "p-chase",
            "randomized": false,
            "size": 0,
            "unit": "bytes",
        }),
        Kind::Latency => json!({
            "mean": 0.0,
            "measurements": 0,
            "method": "p-chase",
            "p50": 0.0,
            "p95": 0.0,
            "sampleSize": 0,
            "stdev": 0.0,
            "unit": "cycles",
        }),
        Kind::Api("GiB/s") => json!({ "unit": "GiB/s", "value": 0.0 }),
        Kind::Api(unit) => json!({ "unit": unit, "value": 0 }),
    }
}

/// The object at `path` (dotted, created empty where absent).
fn object_at<'a>(root: &'a mut Map<String, Value>, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut here = root;
    for key in path {
        let entry = here
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        here = entry.as_object_mut().expect("made an object above");
    }
    here
}

/// The filler: fills keys and remembers each.
struct Filler<'a> {
    root: &'a mut Map<String, Value>,
    filled: Map<String, Value>,
}

impl Filler<'_> {
    /// Fills `object.key` with the placeholder of `kind` where it is absent.
    fn require(&mut self, object: &[&str], key: &str, kind: Kind, why: &str) {
        let target = object_at(self.root, object);
        if !target.contains_key(key) {
            target.insert(key.to_owned(), placeholder(kind));
            let path = object
                .iter()
                .copied()
                .chain([key])
                .collect::<Vec<_>>()
                .join(".");
            self.filled.insert(path, why.into());
        }
    }

    fn has(&self, path: &[&str]) -> bool {
        let mut here = self.root.get(path[0]);
        for key in &path[1..] {
            here = here.and_then(|v| v.get(*key));
        }
        here.is_some()
    }

    fn shared_with(&self, object: &[&str], name: &str) -> bool {
        let mut here = self.root.get(object[0]);
        for key in &object[1..] {
            here = here.and_then(|v| v.get(*key));
        }
        here.and_then(|v| v.get("sharedWith"))
            .and_then(Value::as_array)
            .is_some_and(|names| names.iter().any(|n| n == name))
    }
}

const NOT_MEASURED: &str = "not measured";
const NOT_REPORTED: &str = "not in the result (the driver's value was not recorded)";
const NO_BANDWIDTH: &str =
    "bandwidth not measured; sys-sage reads it wherever a latency is present";

/// Fills every key sys-sage's parser requires and returns `key → why` for each one filled.
pub(crate) fn fill(document: &mut Map<String, Value>) -> Map<String, Value> {
    let mut f = Filler {
        root: document,
        filled: Map::new(),
    };
    f.require(&["general"], "clockRate", Kind::Api("kHz"), NOT_REPORTED);
    for key in [
        "multiProcessorCount",
        "maxThreadsPerBlock",
        "warpSize",
        "maxThreadsPerMultiProcessor",
    ] {
        let compute = object_at(f.root, &["compute"]);
        if !compute.contains_key(key) {
            compute.insert(key.into(), 0.into());
            f.filled
                .insert(format!("compute.{key}"), NOT_REPORTED.into());
        }
    }

    let main = ["memory", "main"];
    f.require(&main, "totalGlobalMem", Kind::Api("bytes"), NOT_REPORTED);
    f.require(&main, "memoryClockRate", Kind::Api("kHz"), NOT_REPORTED);
    f.require(&main, "memoryBusWidth", Kind::Api("bit"), NOT_REPORTED);
    for level in [main, ["memory", "l2"]] {
        if f.has(&[level[0], level[1], "latency"]) {
            f.require(&level, "readBandwidth", Kind::Api("GiB/s"), NO_BANDWIDTH);
            f.require(&level, "writeBandwidth", Kind::Api("GiB/s"), NO_BANDWIDTH);
        }
    }
    f.require(&["memory", "l2"], "size", Kind::Api("bytes"), NOT_REPORTED);

    // The constant caches: with anything besides `totalConstMem`, both levels are read.
    let constant = object_at(f.root, &["memory", "constant"]);
    let levels = constant.keys().any(|k| k != "totalConstMem");
    if constant.is_empty() {
        f.require(
            &["memory", "constant"],
            "totalConstMem",
            Kind::Api("bytes"),
            NOT_REPORTED,
        );
    } else if levels {
        let l15 = ["memory", "constant", "l1.5"];
        f.require(&l15, "fetchGranularity", Kind::Size, NOT_MEASURED);
        f.require(&l15, "size", Kind::Size, NOT_MEASURED);
        let l1 = ["memory", "constant", "l1"];
        if !f.shared_with(&l1, "L1") {
            f.require(&l1, "fetchGranularity", Kind::Size, NOT_MEASURED);
            f.require(&l1, "size", Kind::Size, NOT_MEASURED);
            f.require(&l1, "latency", Kind::Latency, NOT_MEASURED);
        }
    }

    let shared = ["memory", "shared"];
    f.require(
        &shared,
        "sharedMemPerBlock",
        Kind::Api("bytes"),
        NOT_REPORTED,
    );
    f.require(
        &shared,
        "sharedMemPerMultiProcessor",
        Kind::Api("bytes"),
        NOT_REPORTED,
    );

    // The L1 object must exist; its keys are optional. The texture and read-only caches
    // are read only where the L1 (or the texture cache) does not stand for them.
    object_at(f.root, &["memory", "l1"]);
    let l1 = ["memory", "l1"];
    let texture = ["memory", "texture"];
    let read_only = ["memory", "readOnly"];
    let texture_read = f.has(&texture) && !f.shared_with(&l1, "Texture");
    let read_only_read = f.has(&read_only)
        && !f.shared_with(&l1, "Read Only")
        && !(texture_read && f.shared_with(&texture, "Read Only"));
    for (object, read) in [(texture, texture_read), (read_only, read_only_read)] {
        if read {
            f.require(&object, "fetchGranularity", Kind::Size, NOT_MEASURED);
            f.require(&object, "size", Kind::Size, NOT_MEASURED);
            f.require(&object, "latency", Kind::Latency, NOT_MEASURED);
        }
    }
    f.filled
}
