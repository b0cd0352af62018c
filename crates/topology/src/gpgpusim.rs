//! The memory-system half of a GPGPU-Sim configuration (`gpgpusim.config`, read by
//! GPGPU-Sim and by Accel-Sim in both its modes) from a measured topology:
//! `memtopo export gpgpusim RESULT -o gpgpusim.config`.
//!
//! Every option written comes from a measurement or a driver value of the result, with a
//! comment that names it. What memtopo does not measure (MSHRs, write and allocation
//! policies, the interconnect, DRAM timing, the number of memory channels) comes from a
//! base configuration the user names ([`Base`], `--base FILE`): its lines are kept as they
//! are, and an option memtopo sets replaces the base's line in place, the base's value
//! quoted in the comment. A cache option is one string of measured fields (sets, line,
//! ways, sectored or not) and unmeasured ones (policies, MSHRs): it is written only where
//! the base gives the unmeasured fields, otherwise it becomes a comment saying which
//! fields were measured. Nothing is invented.
//!
//! The option semantics follow GPGPU-Sim's source (accel-sim/gpgpu-sim_distribution:
//! `src/gpgpu-sim/gpu-cache.h` `cache_config::init` for the cache strings,
//! `src/gpgpu-sim/gpu-sim.cc` for the options, `src/gpgpu-sim/shader.cc` for the adaptive
//! L1/shared split); the latency options follow Accel-Sim's micro-benchmarks, which print
//! `-gpgpu_l1_latency` as the L1 hit latency, `-gpgpu_l2_rop_latency` as the L2 hit latency
//! minus the L1's and `-dram_latency` as the memory latency minus the L2's.
//! `docs/clients.md` compares the export with the hand-tuned `SM90_H100` configuration.

use std::fmt::Write as _;

mod base;
mod settings;

pub use base::Base;
use base::{cache_string, option_line};
pub use settings::{Setting, Settings, Unset};

use crate::model::{CarveoutRole, ElementKind, Topology};
use crate::quantity::Size;

/// GPGPU-Sim's sector: 32 bytes, four to a line (`SECTOR_SIZE`, `SECTOR_CHUNCK_SIZE` in
/// `src/abstract_hardware_model.h`); a sectored cache (`S`) must have 128-byte lines.
const SECTOR_BYTES: u64 = 32;
const SECTORS_PER_LINE: u64 = 4;

fn exact(size: Option<&Size>) -> Option<u64> {
    size?.bound.exact().map(|b| b.0)
}

fn mean(topo: &Topology, kind: ElementKind) -> Option<f64> {
    Some(topo.element(kind)?.latency.as_ref()?.mean.0)
}

/// `S` where the cache keeps 32-byte sectors of 128-byte lines (its fetch granularity or
/// sector is 32 B), `N` where a miss fills the whole line.
fn sector_kind(line: u64, granularity: Option<u64>) -> Option<&'static str> {
    match granularity? {
        g if g == line => Some("N"),
        SECTOR_BYTES if line == SECTOR_BYTES * SECTORS_PER_LINE => Some("S"),
        _ => None,
    }
}

/// A cache string from the measured geometry and the base's policy and MSHR fields.
#[allow(clippy::too_many_arguments)]
fn cache_setting(
    out: &mut Settings,
    base: Option<&Base>,
    option: &str,
    what: &str,
    kind: Option<&str>,
    sets: Option<(u64, &str)>,
    line: Option<u64>,
    capacity: Option<(u64, &str)>,
) {
    let base_value = base.and_then(|b| b.get(option));
    let base_fields = base_value.and_then(cache_string);
    let sets = sets.or_else(|| {
        let (fields, _) = base_fields.as_ref()?;
        Some((fields[1].parse().ok()?, "the base's sets"))
    });
    let measured = format!(
        "{what}: {}-byte lines{}{}",
        line.map_or("?".into(), |l| l.to_string()),
        kind.map_or(String::new(), |k| format!(", type {k}")),
        capacity.map_or(String::new(), |(c, from)| format!(", {c} B ({from})")),
    );
    let (Some(kind), Some(line), Some((sets, sets_from)), Some((capacity, _))) =
        (kind, line, sets, capacity)
    else {
        out.unset(
            option,
            format!("{measured}; sets, line, ways or type not known"),
        );
        return;
    };
    if sets == 0 || capacity % (sets * line) != 0 {
        out.unset(
            option,
            format!("{measured}: {capacity} B is not a whole number of {sets} sets of {line} B"),
        );
        return;
    }
    let ways = capacity / (sets * line);
    let Some((_, tail)) = base_fields else {
        out.unset(
            option,
            format!(
                "{measured}: {kind}:{sets}:{line}:{ways} measured; the replacement, write and \
                 allocation policies and the MSHRs come from --base"
            ),
        );
        return;
    };
    out.set(
        option,
        format!("{kind}:{sets}:{line}:{ways}{tail}"),
        format!(
            "{measured}; {sets} sets ({sets_from}) x {ways} ways x {line} B; policies and MSHRs \
             from the base"
        ),
    );
}

/// The L1: its carveout configurations, the unified size, its cache string.
fn l1_and_shared(topo: &Topology, base: Option<&Base>, out: &mut Settings) {
    let limits = &topo.device.limits;
    if let Some(shared) = limits.shared_memory_per_sm_bytes {
        out.set(
            "-gpgpu_shmem_size",
            shared.0,
            "driver: shared memory per SM (the largest configuration)",
        );
    }
    if let Some(block) = limits
        .shared_memory_per_block_optin_bytes
        .or(limits.shared_memory_per_block_bytes)
    {
        out.set(
            "-gpgpu_shmem_per_block",
            block.0,
            "driver: the most shared memory one block can have",
        );
    }
    let Some(l1) = topo.element(ElementKind::L1Data) else {
        out.unset("-gpgpu_cache:dl1", "the L1 was not measured");
        return;
    };
    // Rows measured under a configuration the run forced: their shared memory is the one
    // in force, so L1 + shared is the unified store, the same in every row to within the
    // size search's resolution.
    let rows: Vec<(u64, u64, u64)> = l1
        .size_per_carveout
        .iter()
        .filter(|r| {
            matches!(
                r.role,
                Some(CarveoutRole::LargestL1 | CarveoutRole::Configuration)
            )
        })
        .filter_map(|r| {
            let resolution = r.l1_size.evidence.as_ref().and_then(|e| e.resolution);
            Some((
                r.shared_memory_bytes?.0,
                r.l1_size.bound.exact()?.0,
                resolution.map_or(0, |b| b.0),
            ))
        })
        .collect();
    let sums: Vec<u64> = rows.iter().map(|(s, l, _)| s + l).collect();
    let mode = sums
        .iter()
        .copied()
        .max_by_key(|sum| (sums.iter().filter(|s| *s == sum).count(), *sum));
    let unified = match mode {
        Some(sum)
            if sum % 1024 == 0
                && rows
                    .iter()
                    .all(|(s, l, resolution)| (s + l).abs_diff(sum) <= *resolution) =>
        {
            Some(sum)
        }
        Some(_) => {
            out.unset(
                "-gpgpu_unified_l1d_size",
                format!(
                    "L1 + shared memory differs between configurations beyond the search's \
                     resolution, or is not whole KiB: {sums:?} B"
                ),
            );
            None
        }
        None => {
            out.unset(
                "-gpgpu_unified_l1d_size",
                "no L1 size measured under a forced shared-memory configuration",
            );
            None
        }
    };
    if let Some(unified) = unified {
        let mut configs: Vec<u64> = rows.iter().map(|(s, _, _)| s / 1024).collect();
        configs.sort_unstable();
        configs.dedup();
        let list: Vec<String> = configs.iter().map(u64::to_string).collect();
        let rows_text: Vec<String> = rows
            .iter()
            .map(|(s, l, _)| format!("{:.2} KiB + {} KiB", *l as f64 / 1024.0, s / 1024))
            .collect();
        out.set(
            "-gpgpu_adaptive_cache_config",
            1,
            "the L1 size was measured at each shared-memory configuration below",
        );
        out.set(
            "-gpgpu_shmem_option",
            list.join(","),
            "the shared-memory configurations (KiB) the L1 was measured beside",
        );
        out.set(
            "-gpgpu_unified_l1d_size",
            unified / 1024,
            format!(
                "L1 + shared memory, the same in every configuration (to the search's \
                 resolution): {}",
                rows_text.join(", ")
            ),
        );
    }
    let line = exact(l1.line_size.as_ref());
    let granularity = exact(l1.fetch_granularity.as_ref());
    let kind = line.and_then(|l| sector_kind(l, granularity));
    let sets = l1
        .geometry
        .as_ref()
        .and_then(|g| g.sets)
        .map(|c| (u64::from(c.value), "measured"));
    cache_setting(
        out,
        base,
        "-gpgpu_cache:dl1",
        "L1 data cache",
        kind,
        sets,
        line,
        unified.map(|u| {
            (
                u,
                "the unified store: GPGPU-Sim takes ways from it per configuration",
            )
        }),
    );
    if let Some(cached) = l1.global_loads_cached {
        out.set(
            "-gpgpu_gmem_skip_L1D",
            u8::from(!cached),
            format!(
                "global loads {} in the L1 (measured)",
                if cached { "are cached" } else { "bypass it" }
            ),
        );
    }
}

/// Hit latencies as Accel-Sim's micro-benchmarks turn them into options.
fn latencies(topo: &Topology, out: &mut Settings) {
    let l1 = mean(topo, ElementKind::L1Data);
    let l2 = mean(topo, ElementKind::L2);
    let dram = mean(topo, ElementKind::DeviceMemory);
    let cycles = |x: f64| x.round() as i64;
    if let Some(l1) = l1 {
        out.set(
            "-gpgpu_l1_latency",
            cycles(l1),
            format!("L1 hit latency, mean {l1:.1} cycles"),
        );
    }
    if let Some(shared) = mean(topo, ElementKind::SharedMemory) {
        out.set(
            "-gpgpu_smem_latency",
            cycles(shared),
            format!("shared-memory load latency, mean {shared:.1} cycles"),
        );
    }
    match (l1, l2) {
        (Some(l1), Some(l2)) if l2 > l1 => out.set(
            "-gpgpu_l2_rop_latency",
            cycles(l2 - l1),
            format!("L2 hit {l2:.1} - L1 hit {l1:.1} cycles (means)"),
        ),
        _ => out.unset("-gpgpu_l2_rop_latency", "needs the L1 and L2 hit latencies"),
    }
    match (l2, dram) {
        (Some(l2), Some(dram)) if dram > l2 => out.set(
            "-dram_latency",
            cycles(dram - l2),
            format!("device memory {dram:.1} - L2 hit {l2:.1} cycles (means)"),
        ),
        _ => out.unset("-dram_latency", "needs the L2 and device-memory latencies"),
    }
}

/// The L2 split over memory sub-partitions, and the clocks.
fn l2_and_dram(topo: &Topology, base: Option<&Base>, out: &mut Settings) {
    let d = &topo.device;
    let l2 = topo.element(ElementKind::L2);
    let total = d.l2_bytes.map(|b| b.0).or_else(|| exact(l2?.size.as_ref()));
    let channels = base.and_then(|b| {
        Some((
            b.get_u64("-gpgpu_n_mem")?,
            b.get_u64("-gpgpu_n_sub_partition_per_mchannel")
                .unwrap_or(1),
        ))
    });
    let per_sub = match (total, channels) {
        (Some(total), Some((mem, sub))) if mem * sub > 0 && total % (mem * sub) == 0 => Some((
            total / (mem * sub),
            format!("L2 {total} B (driver) / ({mem} channels x {sub} sub-partitions, the base's)"),
        )),
        (Some(total), _) => {
            out.unset(
                "-gpgpu_cache:dl2",
                format!(
                    "the L2 holds {total} B; splitting it needs -gpgpu_n_mem and \
                     -gpgpu_n_sub_partition_per_mchannel from --base (memtopo does not count memory channels)"
                ),
            );
            None
        }
        _ => None,
    };
    if let Some((per_sub, from)) = per_sub {
        let line = l2.and_then(|e| exact(e.line_size.as_ref()));
        let granularity =
            l2.and_then(|e| exact(e.sector_size.as_ref()).or(exact(e.fetch_granularity.as_ref())));
        let kind = line.and_then(|l| sector_kind(l, granularity));
        let per_sub_text = format!("{from}: {per_sub} B each");
        cache_setting(
            out,
            base,
            "-gpgpu_cache:dl2",
            "L2 per memory sub-partition",
            kind,
            None,
            line,
            Some((per_sub, per_sub_text.as_str())),
        );
    }
    // The base's memory channels against the bus the driver reports, and the DRAM peak
    // they give against the measured read bandwidth.
    if let (Some(b), Some(bus)) = (base, d.memory_bus_width_bits) {
        if let (Some(mem), Some(width)) =
            (b.get_u64("-gpgpu_n_mem"), b.get_u64("-gpgpu_dram_buswidth"))
        {
            let chips = b.get_u64("-gpgpu_n_mem_per_ctrlr").unwrap_or(1);
            let base_bus = mem * chips * width * 8;
            if base_bus != u64::from(bus) {
                out.notes.push(format!(
                    "the base's -gpgpu_n_mem {mem} x -gpgpu_n_mem_per_ctrlr {chips} x \
                     -gpgpu_dram_buswidth {width} B make a {base_bus}-bit bus; the driver \
                     reports {bus} bits for this GPU: adjust the base's channels"
                ));
            }
        }
    }
    if let (Some(bus), Some(clock)) = (d.memory_bus_width_bits, d.memory_clock_mhz) {
        let peak = f64::from(bus) / 8.0 * clock.0 * 1e6 * 2.0 / f64::from(1u32 << 30);
        let measured = topo
            .element(ElementKind::DeviceMemory)
            .and_then(|e| e.bandwidth.as_ref()?.read.as_ref())
            .map_or(String::new(), |r| {
                format!(
                    "; measured reads reach {:.0} GiB/s ({:.0} %)",
                    r.value,
                    100.0 * r.value / peak
                )
            });
        out.notes.push(format!(
            "device memory: {bus} bits x {:.1} MHz x 2 (double data rate) = {peak:.0} GiB/s \
             peak{measured}",
            clock.0
        ));
    }
    let core = topo
        .conditions
        .sm_clock_mhz
        .map(|c| (c.0, "measured"))
        .or(d.sm_clock_mhz.map(|c| (c.0, "driver")));
    let other = base
        .and_then(|b| b.get("-gpgpu_clock_domains"))
        .map(|v| v.split(':').collect::<Vec<_>>());
    match (core, d.memory_clock_mhz, other) {
        (Some((core, core_from)), Some(memory), Some(domains)) if domains.len() == 4 => out.set(
            "-gpgpu_clock_domains",
            format!("{core:.1}:{}:{}:{:.1}", domains[1], domains[2], memory.0),
            format!(
                "core clock {core:.1} MHz ({core_from}), memory clock {:.1} MHz (driver); the \
                 interconnect and L2 clocks are the base's",
                memory.0
            ),
        ),
        _ => out.unset(
            "-gpgpu_clock_domains",
            format!(
                "core {} MHz, memory {} MHz; the interconnect and L2 clocks come from --base",
                core.map_or("?".into(), |c| format!("{:.1}", c.0)),
                d.memory_clock_mhz
                    .map_or("?".into(), |m| format!("{:.1}", m.0))
            ),
        ),
    }
}

/// The constant and texture caches.
fn constant_and_texture(topo: &Topology, base: Option<&Base>, out: &mut Settings) {
    for (kind, option, what) in [
        (
            ElementKind::ConstantL1,
            "-gpgpu_const_cache:l1",
            "constant L1",
        ),
        (
            ElementKind::Texture,
            "-gpgpu_tex_cache:l1",
            "texture cache (on Volta and later the L1's storage)",
        ),
    ] {
        let Some(element) = topo.element(kind) else {
            out.unset(option, format!("the {what} was not measured"));
            continue;
        };
        let line = exact(element.line_size.as_ref());
        let granularity = exact(element.fetch_granularity.as_ref());
        // GPGPU-Sim's texture and constant caches are not sectored.
        let cache_kind = line.filter(|_| granularity.is_some()).map(|_| "N");
        let sets = element
            .geometry
            .as_ref()
            .and_then(|g| g.sets)
            .map(|c| (u64::from(c.value), "measured"));
        let size = exact(element.size.as_ref()).map(|s| (s, "measured size"));
        cache_setting(out, base, option, what, cache_kind, sets, line, size);
    }
}

/// Everything the export sets, and what it leaves to the base.
pub fn settings(topo: &Topology, base: Option<&Base>) -> Settings {
    let mut out = Settings::default();
    let sms = topo.device.sm_count;
    let per_cluster = base.and_then(|b| b.get_u64("-gpgpu_n_cores_per_cluster"));
    match per_cluster {
        None => {
            out.set(
                "-gpgpu_n_clusters",
                sms,
                "driver: SM count, one SM per cluster",
            );
            out.set("-gpgpu_n_cores_per_cluster", 1, "one SM per cluster");
        }
        Some(n) if n > 0 && u64::from(sms) % n == 0 => out.set(
            "-gpgpu_n_clusters",
            u64::from(sms) / n,
            format!("driver: {sms} SMs / {n} per cluster (the base's)"),
        ),
        Some(n) => out.unset(
            "-gpgpu_n_clusters",
            format!("{sms} SMs are not a multiple of the base's {n} per cluster"),
        ),
    }
    l1_and_shared(topo, base, &mut out);
    latencies(topo, &mut out);
    l2_and_dram(topo, base, &mut out);
    constant_and_texture(topo, base, &mut out);
    out
}

/// The configuration text: the base's lines with memtopo's options in place of the
/// base's, or memtopo's options alone without a base; each preceded by a comment with its
/// source.
///
/// ```
/// use topology::*;
/// let mut topo = Topology::new(DeviceInfo::new("GPU", ComputeCapability::new(9, 0), 132));
/// topo.element_mut(ElementKind::L1Data).set_latency(Latency::measured(
///     LatencySummary::from_samples(&[38.0, 38.0, 39.0]).unwrap()));
/// let base = gpgpusim::Base::parse("-gpgpu_l1_latency 20\n-gpgpu_n_mem 80\n");
/// let text = gpgpusim::export(&topo, Some(&base));
/// assert!(text.contains("-gpgpu_l1_latency 38\n"));
/// assert!(text.contains("(the base had 20)"));
/// assert!(text.contains("-gpgpu_n_mem 80\n"));
/// assert!(!text.contains("-gpgpu_l1_latency 20\n"));
/// ```
pub fn export(topo: &Topology, base: Option<&Base>) -> String {
    let settings = settings(topo, base);
    let mut text = String::new();
    let device = &topo.device;
    let _ =
        writeln!(
        text,
        "# GPGPU-Sim memory-system options of {} (compute capability {}), from memtopo's result{}.",
        device.name,
        device.compute_capability,
        topo.conditions.date.as_ref().map_or(String::new(), |d| format!(" of {d}"))
    );
    let _ = writeln!(
        text,
        "# Each option memtopo sets follows a `# memtopo:` line naming its measurement.{}",
        if base.is_some() {
            " Every other line is the base's."
        } else {
            ""
        }
    );
    for note in &settings.notes {
        let _ = writeln!(text, "# memtopo: {note}");
    }
    for unset in &settings.unset {
        let _ = writeln!(
            text,
            "# memtopo: {} not set: {}",
            unset.option, unset.reason
        );
    }
    let mut written = vec![false; settings.set.len()];
    if let Some(base) = base {
        for line in &base.lines {
            let found = option_line(line).and_then(|(name, value)| {
                let i = settings.set.iter().position(|s| s.option == name)?;
                Some((i, value))
            });
            match found {
                Some((i, was)) => {
                    let s = &settings.set[i];
                    if written[i] {
                        let _ = writeln!(
                            text,
                            "# memtopo: set above, the base set it again: {}",
                            line.trim()
                        );
                        continue;
                    }
                    written[i] = true;
                    let _ = writeln!(text, "# memtopo: {} (the base had {was})", s.source);
                    let _ = writeln!(text, "{} {}", s.option, s.value);
                }
                None => {
                    let _ = writeln!(text, "{line}");
                }
            }
        }
    }
    if written.iter().any(|w| !w) {
        if base.is_some() {
            let _ = writeln!(text, "\n# memtopo: options the base does not set");
        }
        for (s, _) in settings.set.iter().zip(&written).filter(|(_, w)| !**w) {
            let _ = writeln!(text, "# memtopo: {}", s.source);
            let _ = writeln!(text, "{} {}", s.option, s.value);
        }
    }
    text
}
