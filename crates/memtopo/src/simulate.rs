//! Simulated GPUs: the node `--simulate` names (`3xh100,h100:memory=+25%`), each GPU's
//! profile with its perturbations, and the UUIDs of simulated GPUs that name none.

use std::path::Path;

use pchase_runner::{sim::SimProfile, RunnerError};

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

/// `gen4x8` as (4, 8).
fn pcie_link(text: &str) -> Option<(u32, u32)> {
    let lower = text.trim().to_ascii_lowercase();
    let (generation, width) = lower.strip_prefix("gen")?.split_once('x')?;
    Some((generation.parse().ok()?, width.parse().ok()?))
}

fn scaled(cycles: u32, by: f64) -> u32 {
    (f64::from(cycles) * by)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// Loads one simulated GPU: `PROFILE[:KEY=VALUE]...`, the profile a bundled name or a
/// TOML file; keys `memory` (device-memory latency), `memory_bandwidth` (its read, write
/// and copy throughput), `l2` (the L2's latencies), `l2_bandwidth` (the L2's read and
/// write throughput), `clock` (the SM clock), `host_link` (every rate of the host link)
/// take a change (`+25%`) or a factor; `pcie`
/// the trained PCIe link (`gen4x8`, below the profile's maximum), `nvlink` the active
/// NVLinks (`17`); `uuid` names the GPU and `seed` draws its noise afresh. A perturbed profile models a GPU unlike its
/// siblings (a slow memory, a throttled clock, a link down).
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
            "memory_bandwidth" | "l2_bandwidth" => {
                let by = factor(key, value)?;
                let Some(bw) = profile.bandwidth.as_mut() else {
                    return Err(RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: the profile models no bandwidths"
                    )));
                };
                let levels = if key.trim() == "memory_bandwidth" {
                    vec![
                        &mut bw.memory_read,
                        &mut bw.memory_write,
                        &mut bw.memory_copy,
                    ]
                } else {
                    let mut l2 = vec![&mut bw.l2_near, &mut bw.l2];
                    l2.extend(bw.l2_write.as_mut());
                    l2
                };
                for level in levels {
                    level.peak *= by;
                }
            }
            "host_link" => {
                let by = factor(key, value)?;
                let Some(host) = profile.host_link.as_mut() else {
                    return Err(RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: the profile has no [host_link] to change"
                    )));
                };
                for rate in [
                    &mut host.copy_h2d_gb_per_s,
                    &mut host.copy_d2h_gb_per_s,
                    &mut host.both_h2d_gb_per_s,
                    &mut host.both_d2h_gb_per_s,
                    &mut host.pageable_h2d_gb_per_s,
                    &mut host.pageable_d2h_gb_per_s,
                    &mut host.sm_read_gb_per_s,
                    &mut host.sm_write_gb_per_s,
                ] {
                    *rate *= by;
                }
            }
            "pcie" => {
                let links = profile.links.as_mut().ok_or_else(|| {
                    RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: the profile has no [links] to change"
                    ))
                })?;
                (links.pcie_generation, links.pcie_width) = pcie_link(value).ok_or_else(|| {
                    RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: give the link as gen<N>x<lanes>, e.g. gen4x8"
                    ))
                })?;
            }
            "nvlink" => {
                let links = profile.links.as_mut().ok_or_else(|| {
                    RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: the profile has no [links] to change"
                    ))
                })?;
                links.nvlink = value.trim().parse().map_err(|_| {
                    RunnerError::Profile(format!(
                        "`{part}` in `{spec}`: give the number of active NVLinks, e.g. nvlink=17"
                    ))
                })?;
            }
            "uuid" => {
                profile.uuid = Some(value.trim().to_owned());
                continue;
            }
            "seed" => {
                // Another draw of the same GPU's noise, not a change of the GPU.
                profile.seed = value.trim().parse().map_err(|_| {
                    RunnerError::Profile(format!("`{part}` in `{spec}`: give a whole number"))
                })?;
                continue;
            }
            other => {
                return Err(RunnerError::Profile(format!(
                    "`{other}` in `{spec}`: unknown perturbation; use memory, \
                     memory_bandwidth, l2, l2_bandwidth, clock, host_link, pcie, nvlink, uuid or seed"
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

/// The profile's name for the run record: the bundled name, or the file's path.
pub fn profile_label(spec: &str, name: &str) -> String {
    if Path::new(spec).exists() {
        format!("{name} ({spec})")
    } else {
        name.to_string()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
