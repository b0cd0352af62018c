//! Which GPUs a run measures (`--device N|LIST|all`), the simulated node
//! (`--simulate h100,h100:memory=+25%`), the node's name, and the names of per-GPU files
//! (`{uuid}`, `{index}`, `{node}` in `-o` paths).

use std::{
    fmt,
    path::{Path, PathBuf},
};

use pchase_runner::{sim::SimProfile, RunnerError};

/// The GPUs `--device` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSelection {
    /// One index (the default, 0): a single run, as before.
    One(u32),
    /// Several indices, in the order given, without repeats.
    List(Vec<u32>),
    /// Every device.
    All,
}

impl DeviceSelection {
    /// The single index, for a run of one GPU.
    pub fn single(&self) -> Option<u32> {
        match self {
            DeviceSelection::One(i) => Some(*i),
            _ => None,
        }
    }

    /// The indices on a node of `count` devices; an index past the last is an error.
    pub fn resolve(&self, count: u32) -> Result<Vec<u32>, RunnerError> {
        let list = match self {
            DeviceSelection::One(i) => vec![*i],
            DeviceSelection::List(list) => list.clone(),
            DeviceSelection::All => (0..count).collect(),
        };
        match list.iter().find(|&&i| i >= count) {
            Some(&index) => Err(RunnerError::BadDeviceIndex { index, count }),
            None if list.is_empty() => Err(RunnerError::NoDevice),
            None => Ok(list),
        }
    }
}

impl fmt::Display for DeviceSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelection::One(i) => write!(f, "{i}"),
            DeviceSelection::List(list) => {
                let texts: Vec<String> = list.iter().map(u32::to_string).collect();
                f.write_str(&texts.join(","))
            }
            DeviceSelection::All => f.write_str("all"),
        }
    }
}

/// `--device`: `all`, an index, or indices separated by commas.
pub fn parse_devices(text: &str) -> Result<DeviceSelection, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Ok(DeviceSelection::All);
    }
    if !text.contains(',') {
        return crate::cli::parse_device(text).map(DeviceSelection::One);
    }
    let mut list = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            return Err(format!(
                "`{text}` has an empty entry: give indices separated by commas (`0,3`) or `all`"
            ));
        }
        let index = crate::cli::parse_device(part)?;
        if list.contains(&index) {
            return Err(format!("`{text}` names device {index} twice"));
        }
        list.push(index);
    }
    Ok(DeviceSelection::List(list))
}

/// The simulated GPUs of `--simulate`: a profile file as a whole, else entries separated
/// by commas, each a profile maybe with perturbations (`h100:memory=+25%`), or `NxPROFILE`
/// for N alike (`8xh100`).
pub fn simulated_specs(spec: &str) -> Vec<String> {
    if Path::new(spec).exists() {
        return vec![spec.to_owned()];
    }
    let mut specs = Vec::new();
    for entry in spec.split(',').map(str::trim) {
        let repeated = entry
            .split_once('x')
            .and_then(|(n, rest)| Some((n.parse::<usize>().ok()?, rest)))
            .filter(|(n, rest)| (1..=64).contains(n) && !rest.is_empty());
        match repeated {
            Some((n, rest)) => specs.extend(std::iter::repeat_n(rest.to_owned(), n)),
            None => specs.push(entry.to_owned()),
        }
    }
    specs
}

/// A factor from `+25%`, `-10%` or `1.2`.
fn factor(key: &str, text: &str) -> Result<f64, RunnerError> {
    let bad = || {
        RunnerError::Profile(format!(
            "{key}={text}: give a change in percent (`+25%`, `-10%`) or a factor (`1.25`)"
        ))
    };
    let value = if let Some(percent) = text.strip_suffix('%') {
        1.0 + percent.trim().parse::<f64>().map_err(|_| bad())? / 100.0
    } else {
        text.trim().parse::<f64>().map_err(|_| bad())?
    };
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(bad())
    }
}

fn scaled(cycles: u32, by: f64) -> u32 {
    (f64::from(cycles) * by)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Loads one simulated GPU: `PROFILE[:KEY=VALUE]...`, the profile a bundled name or a
/// TOML file; keys `memory` (device-memory latency), `l2` (the L2's latencies), `clock`
/// (the SM clock) take a change (`+25%`) or a factor, `uuid` names the GPU. A perturbed
/// profile models a GPU unlike its siblings (a slow memory, a throttled clock).
pub fn load_profile(spec: &str) -> Result<SimProfile, RunnerError> {
    let path = Path::new(spec);
    if path.exists() {
        return SimProfile::load(path);
    }
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let mut profile = if Path::new(name).exists() {
        SimProfile::load(name)?
    } else {
        SimProfile::bundled(name)?
    };
    let mut perturbed = Vec::new();
    for part in parts {
        let (key, value) = part.split_once('=').ok_or_else(|| {
            RunnerError::Profile(format!(
                "`{part}` in `{spec}`: perturbations are KEY=VALUE (memory=+25%, l2=+10%, \
                 clock=-20%, uuid=GPU-…)"
            ))
        })?;
        match key.trim() {
            "memory" => {
                let by = factor(key, value)?;
                profile.memory.latency = scaled(profile.memory.latency, by);
            }
            "l2" => {
                let by = factor(key, value)?;
                profile.l2.near_latency = scaled(profile.l2.near_latency, by);
                profile.l2.far_latency = profile.l2.far_latency.map(|f| scaled(f, by));
            }
            "clock" => profile.clock.sm_mhz *= factor(key, value)?,
            "uuid" => {
                profile.uuid = Some(value.trim().to_owned());
                continue;
            }
            other => {
                return Err(RunnerError::Profile(format!(
                    "`{other}` in `{spec}`: unknown perturbation; use memory, l2, clock or uuid"
                )))
            }
        }
        perturbed.push(part.trim());
    }
    if !perturbed.is_empty() {
        profile.description = format!(
            "{} (perturbed: {})",
            profile.description,
            perturbed.join(", ")
        );
    }
    profile.validate()?;
    Ok(profile)
}

/// The node's name: Slurm's (`SLURMD_NODENAME`, set in every task), else the host name.
pub fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .or_else(|| crate::conditions::base_record().host)
        .unwrap_or_else(|| "localhost".into())
}

/// FNV-1a, for simulated UUIDs that stay the same across runs.
fn fnv(seed: u64, text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325 ^ seed, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The UUID of simulated GPU `index` of `node` (profile `spec`), the same at every run:
/// `GPU-` and 32 hex digits in the 8-4-4-4-12 grouping, as the driver prints them.
pub fn simulated_uuid(node: &str, index: u32, spec: &str) -> String {
    let key = format!("{node}/{index}/{spec}");
    let hex = format!("{:016x}{:016x}", fnv(1, &key), fnv(2, &key));
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// An output path with `{uuid}`, `{index}` and `{node}` replaced.
pub fn expand(path: &Path, uuid: &str, index: u32, node: &str) -> PathBuf {
    let text = path.to_string_lossy();
    PathBuf::from(
        text.replace("{uuid}", uuid)
            .replace("{index}", &index.to_string())
            .replace("{node}", node),
    )
}

/// An output path with `{node}` replaced (the GPU's names come later).
pub fn expand_node(path: &Path, node: &str) -> PathBuf {
    PathBuf::from(path.to_string_lossy().replace("{node}", node))
}

/// Whether `path` names one file per GPU.
pub fn is_per_gpu(path: &Path) -> bool {
    let text = path.to_string_lossy();
    text.contains("{uuid}") || text.contains("{index}")
}

/// `-o DIR/` (or an existing folder): one `{uuid}.json` per GPU in it.
pub fn per_gpu_in(path: &Path) -> Option<PathBuf> {
    let text = path.to_string_lossy();
    (text.ends_with('/') || path.is_dir()).then(|| path.join("{uuid}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_and_resolve() {
        assert_eq!(parse_devices("all"), Ok(DeviceSelection::All));
        assert_eq!(parse_devices("2"), Ok(DeviceSelection::One(2)));
        assert_eq!(parse_devices("0,3"), Ok(DeviceSelection::List(vec![0, 3])));
        assert!(parse_devices("0,0").unwrap_err().contains("twice"));
        assert!(parse_devices("0,").unwrap_err().contains("empty"));
        assert!(parse_devices("0,-1").unwrap_err().contains("0 to N-1"));
        assert_eq!(DeviceSelection::All.resolve(3).unwrap(), [0, 1, 2]);
        assert!(matches!(
            DeviceSelection::List(vec![0, 3]).resolve(2),
            Err(RunnerError::BadDeviceIndex { index: 3, count: 2 })
        ));
        assert_eq!(parse_devices("1,0").unwrap().to_string(), "1,0");
    }

    #[test]
    fn perturbations_change_what_they_name() {
        let base = load_profile("h100").unwrap();
        let slow = load_profile("h100:memory=+25%:clock=0.5").unwrap();
        assert_eq!(
            slow.memory.latency,
            (f64::from(base.memory.latency) * 1.25).round() as u32
        );
        assert_eq!(slow.clock.sm_mhz, base.clock.sm_mhz * 0.5);
        assert_eq!(slow.l2.near_latency, base.l2.near_latency);
        assert!(slow.description.contains("perturbed"));
        for bad in [
            "h100:memory",
            "h100:memory=fast",
            "h100:voltage=+1%",
            "h100:clock=-100%",
        ] {
            assert!(
                matches!(load_profile(bad), Err(RunnerError::Profile(_))),
                "{bad}"
            );
        }
        assert_eq!(
            load_profile("h100:uuid=GPU-1").unwrap().uuid.as_deref(),
            Some("GPU-1")
        );
    }

    #[test]
    fn simulated_uuids_are_stable_and_distinct() {
        let a = simulated_uuid("n1", 0, "h100");
        assert_eq!(a, simulated_uuid("n1", 0, "h100"));
        assert_ne!(a, simulated_uuid("n1", 1, "h100"));
        assert_ne!(a, simulated_uuid("n2", 0, "h100"));
        assert_eq!(a.len(), 40);
        assert!(a.starts_with("GPU-"));
    }

    #[test]
    fn simulated_nodes_list_their_gpus() {
        assert_eq!(simulated_specs("h100"), ["h100"]);
        assert_eq!(
            simulated_specs("2xh100,h200:memory=+25%"),
            ["h100", "h100", "h200:memory=+25%"]
        );
        // Not a count: left to the profile loader, which names what is wrong.
        assert_eq!(simulated_specs("0xh100"), ["0xh100"]);
    }

    #[test]
    fn templates_expand() {
        let p = expand(
            Path::new("out/{node}/{uuid}-{index}.json"),
            "GPU-x",
            3,
            "n1",
        );
        assert_eq!(p, PathBuf::from("out/n1/GPU-x-3.json"));
        assert!(is_per_gpu(Path::new("r/{index}.md")));
        assert!(!is_per_gpu(Path::new("r/{node}.md")));
        assert_eq!(
            per_gpu_in(Path::new("res/")),
            Some(PathBuf::from("res/{uuid}.json"))
        );
    }
}
