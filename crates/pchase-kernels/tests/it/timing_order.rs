//! The timed loops measure what they claim: in every fine-grained kernel the loop reads the
//! clock, loads the next index (whose address depends on the previous load), stores the loaded
//! index to shared memory, and only then reads the clock again.

use pchase_kernels::{catalogue, Granularity, Kernel, KernelKind, LoadPath};

use crate::ptx_text::{parse_module, Instruction, Statement};

/// The load instruction each kernel must time, spelled independently of the generator.
fn expected_load(kernel: &Kernel) -> &'static str {
    match kernel.kind() {
        KernelKind::Chase { path, .. } | KernelKind::ChaseLines { path } => path_load(path),
        KernelKind::ChaseDistributedShared => "ld.u32",
        // The timed (and first warm-up) loads of a two-phase kernel are chain A's.
        KernelKind::TwoPhase { first, .. } => path_load(first),
        other => panic!("{other:?} is not a chase"),
    }
}

/// The load instruction of a path, spelled independently of the generator.
pub fn path_load(path: LoadPath) -> &'static str {
    match path {
        LoadPath::GlobalCa => "ld.global.ca.u32",
        LoadPath::GlobalCg => "ld.global.cg.u32",
        LoadPath::GlobalNc => "ld.global.nc.u32",
        LoadPath::Texture => "tex.1d.v4.u32.s32",
        LoadPath::Constant => "ld.const.u32",
        LoadPath::Shared => "ld.shared.u32",
    }
}

fn fine_kernels() -> Vec<&'static Kernel> {
    catalogue::kernels()
        .filter(|k| {
            matches!(
                k.kind(),
                KernelKind::Chase {
                    granularity: Granularity::Fine,
                    ..
                } | KernelKind::ChaseDistributedShared
                    | KernelKind::TwoPhase { .. }
                    | KernelKind::ChaseLines { .. }
            )
        })
        .collect()
}

/// The one loop of `entry` that reads `%clock` (the fine-grained timed loop).
pub fn timed_loop(kernel: &Kernel) -> Vec<Instruction> {
    let module = parse_module(kernel.module().ptx());
    let mut timed: Vec<_> = module
        .entry(kernel.entry())
        .loops()
        .into_iter()
        .filter(|body| body.iter().any(Instruction::is_clock32_read))
        .collect();
    assert_eq!(
        timed.len(),
        1,
        "{}: expected one timed loop",
        kernel.entry()
    );
    timed.remove(0)
}

/// Registers computed (transitively) from `seed` by the instructions before `end`.
fn derived_from(body: &[Instruction], seed: &str, end: usize) -> Vec<String> {
    let mut tainted = vec![seed.to_owned()];
    for instruction in &body[..end] {
        if instruction.uses().iter().any(|u| tainted.contains(u)) {
            tainted.extend(instruction.defs());
        }
    }
    tainted
}

/// Checks the timed loop of a fine kernel and returns a description of what failed.
fn check_fine_loop(body: &[Instruction], load_opcode: &str) -> Result<(), String> {
    let clocks: Vec<usize> = (0..body.len())
        .filter(|&i| body[i].is_clock32_read())
        .collect();
    let [t0, t1] = clocks[..] else {
        return Err(format!(
            "expected two %clock reads in the timed loop, found {}",
            clocks.len()
        ));
    };
    let loads: Vec<usize> = (0..body.len())
        .filter(|&i| body[i].is_memory_load())
        .collect();
    let [load] = loads[..] else {
        return Err(format!(
            "expected one load in the timed loop, found {}",
            loads.len()
        ));
    };
    if body[load].opcode != load_opcode {
        return Err(format!(
            "timed load is `{}`, expected `{load_opcode}`",
            body[load].opcode
        ));
    }
    if !(t0 < load && load < t1) {
        return Err(format!(
            "load at {load} is not between the clock reads at {t0} and {t1}"
        ));
    }
    let index = body[load]
        .defs()
        .first()
        .cloned()
        .ok_or("the load writes no register")?;

    // The load's address comes from the index the previous iteration loaded.
    let address_registers =
        Instruction::registers_in(body[load].operands.last().ok_or("load without address")?);
    let derived = derived_from(body, &index, load);
    if !address_registers
        .iter()
        .any(|r| r != &index && derived.contains(r))
    {
        return Err(format!(
            "load address {address_registers:?} does not depend on {index}"
        ));
    }

    // Between the load and the second clock read: a shared store of exactly the loaded index.
    let dependent_store = (load + 1..t1)
        .find(|&i| body[i].opcode == "st.shared.u32" && body[i].operands.get(1) == Some(&index));
    let Some(store) = dependent_store else {
        return Err(format!(
            "no `st.shared.u32 [..], {index}` between the load and the second clock read"
        ));
    };
    if (load + 1..store).any(|i| body[i].defs().contains(&index)) {
        return Err(format!(
            "{index} is overwritten between the load and its store"
        ));
    }

    // After the second read: latency = t1 - t0, stored to shared memory.
    let t0_reg = &body[t0].operands[0];
    let t1_reg = &body[t1].operands[0];
    let sub = (t1 + 1..body.len())
        .find(|&i| {
            body[i].opcode == "sub.u32"
                && body[i].operands[1] == *t1_reg
                && body[i].operands[2] == *t0_reg
        })
        .ok_or("no `sub.u32 lat, t1, t0` after the second clock read")?;
    let latency = &body[sub].operands[0];
    if !(sub + 1..body.len())
        .any(|i| body[i].opcode == "st.shared.u32" && body[i].operands[1] == *latency)
    {
        return Err(format!("latency {latency} is not stored to shared memory"));
    }
    Ok(())
}

#[test]
fn fine_kernels_time_load_then_dependent_shared_store_between_clock_reads() {
    let kernels = fine_kernels();
    let two_phase = catalogue::TWO_PHASE_PATHS.len() * catalogue::TWO_PHASE_PATHS.len();
    let lines = catalogue::LINES_PATHS.len();
    assert_eq!(kernels.len(), LoadPath::ALL.len() + 1 + two_phase + lines);
    for kernel in kernels {
        if let Err(problem) = check_fine_loop(&timed_loop(kernel), expected_load(kernel)) {
            panic!("{}: {problem}", kernel.entry());
        }
    }
}

#[test]
fn two_phase_timed_loops_are_the_fine_chase_loops_of_their_first_path() {
    // Same instructions in the same order, so `clock_overhead` and the single-path
    // calibration apply to the re-timed pass unchanged.
    for first in catalogue::TWO_PHASE_PATHS {
        let reference = timed_loop(catalogue::chase(first, Granularity::Fine));
        for second in catalogue::TWO_PHASE_PATHS {
            let kernel = catalogue::two_phase(first, second).unwrap();
            assert_eq!(timed_loop(kernel), reference, "{}", kernel.entry());
        }
    }
}

#[test]
fn per_load_timed_loops_are_not_unrolled() {
    // Each timed step must be the same machine code, so the overhead that `clock_overhead`
    // calibrates applies to every step; the templates forbid unrolling of those loops.
    for kernel in fine_kernels()
        .into_iter()
        .chain([catalogue::clock_overhead()])
    {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let timed_labels: Vec<String> = entry
            .loops()
            .into_iter()
            .zip(loop_labels(entry))
            .filter(|(body, _)| body.iter().any(Instruction::is_clock32_read))
            .map(|(_, label)| label)
            .collect();
        let [timed_label] = &timed_labels[..] else {
            panic!(
                "{}: expected one timed loop, found {timed_labels:?}",
                kernel.entry()
            );
        };
        let labels = entry.nounroll_loop_labels();
        assert_eq!(
            labels,
            std::slice::from_ref(timed_label),
            "{}",
            kernel.entry()
        );
    }
}

/// Labels of the loops `Entry::loops` returns, in the same order.
fn loop_labels(entry: &crate::ptx_text::Entry) -> Vec<String> {
    entry
        .body
        .iter()
        .enumerate()
        .filter_map(|(start, s)| match s {
            Statement::Label(label)
                if entry.body[start + 1..].iter().any(|t| {
                    matches!(t, Statement::Instruction(i) if i.branch_target() == Some(label.as_str()))
                }) =>
            {
                Some(label.clone())
            }
            _ => None,
        })
        .collect()
}

/// Loops of `kernel` that read no clock and load with `load`.
fn untimed_loops_loading(kernel: &Kernel, load: &str) -> usize {
    let module = parse_module(kernel.module().ptx());
    module
        .entry(kernel.entry())
        .loops()
        .into_iter()
        .filter(|body| {
            !body
                .iter()
                .any(|i| i.is_clock32_read() || i.is_clock64_read())
                && body.iter().any(|i| i.opcode == load)
        })
        .count()
}

#[test]
fn chase_kernels_have_an_untimed_warmup_loop_with_the_same_load() {
    for kernel in catalogue::kernels().filter(|k| {
        matches!(
            k.kind(),
            KernelKind::Chase { .. } | KernelKind::ChaseDistributedShared
        )
    }) {
        assert!(
            untimed_loops_loading(kernel, expected_load(kernel)) > 0,
            "{}: no untimed warm-up loop",
            kernel.entry()
        );
    }
}

#[test]
fn two_phase_kernels_have_an_untimed_loop_per_path() {
    for first in catalogue::TWO_PHASE_PATHS {
        for second in catalogue::TWO_PHASE_PATHS {
            let kernel = catalogue::two_phase(first, second).unwrap();
            // Chain A's warm-up, and chain B's (the same loop count when both paths agree).
            let expected = if first == second { 2 } else { 1 };
            for path in [first, second] {
                assert_eq!(
                    untimed_loops_loading(kernel, path_load(path)),
                    expected,
                    "{}: untimed loops through {path}",
                    kernel.entry()
                );
            }
        }
    }
}

#[test]
fn coarse_kernels_close_the_interval_after_a_use_of_the_last_load() {
    for path in LoadPath::ALL {
        let kernel = catalogue::chase(path, Granularity::Coarse);
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let body: Vec<Instruction> = entry.instructions().cloned().collect();
        let reads: Vec<usize> = (0..body.len())
            .filter(|&i| body[i].is_clock64_read())
            .collect();
        let [c0, c1] = reads[..] else {
            panic!(
                "{}: expected two %clock64 reads, found {}",
                kernel.entry(),
                reads.len()
            );
        };
        let loads: Vec<usize> = (c0..c1)
            .filter(|&i| body[i].opcode == expected_load(kernel))
            .collect();
        assert_eq!(
            loads.len(),
            1,
            "{}: one load inside the interval",
            kernel.entry()
        );
        let index = body[loads[0]].defs()[0].clone();
        assert!(
            (loads[0] + 1..c1)
                .any(|i| body[i].opcode.starts_with("st.") && body[i].operands[1] == index),
            "{}: no store of {index} before the closing clock read",
            kernel.entry()
        );
        assert!(
            entry
                .loops()
                .iter()
                .any(|l| l.iter().any(|i| i.opcode == expected_load(kernel))
                    && !l.iter().any(Instruction::is_clock64_read)),
            "{}: the timed loop must not read the clock per step",
            kernel.entry()
        );
    }
}

#[test]
fn clock_overhead_times_the_store_without_a_load() {
    let kernel = catalogue::clock_overhead();
    let module = parse_module(kernel.module().ptx());
    let timed: Vec<_> = module
        .entry(kernel.entry())
        .loops()
        .into_iter()
        .filter(|body| body.iter().any(Instruction::is_clock32_read))
        .collect();
    assert_eq!(timed.len(), 1);
    let body = &timed[0];
    let clocks: Vec<usize> = (0..body.len())
        .filter(|&i| body[i].is_clock32_read())
        .collect();
    assert_eq!(clocks.len(), 2);
    assert!(!body.iter().any(Instruction::is_memory_load));
    let stores = (clocks[0]..clocks[1])
        .filter(|&i| body[i].opcode == "st.shared.u32")
        .count();
    assert_eq!(
        stores, 1,
        "one shared store between the reads, as in the fine kernels"
    );
}

#[test]
fn only_thread_zero_chases() {
    // Each chase kernel reads %tid.x first and branches every other thread away before the
    // warm-up loop (the shared paths after their cooperative copy and barrier).
    for kernel in catalogue::kernels().filter(|k| matches!(k.kind(), KernelKind::Chase { .. })) {
        let module = parse_module(kernel.module().ptx());
        let body: Vec<Instruction> = module
            .entry(kernel.entry())
            .instructions()
            .cloned()
            .collect();
        let tid = body
            .iter()
            .position(|i| i.operands.get(1).is_some_and(|o| o == "%tid.x"))
            .unwrap_or_else(|| panic!("{} never reads %tid.x", kernel.entry()));
        let tid_reg = &body[tid].operands[0];
        let idle = body
            .iter()
            .find(|i| {
                i.opcode == "setp.ne.u32" && i.operands[1] == *tid_reg && i.operands[2] == "0"
            })
            .map(|i| i.operands[0].clone())
            .unwrap_or_else(|| panic!("{}: no `setp.ne.u32 p, tid, 0`", kernel.entry()));
        let exit = body
            .iter()
            .position(|i| i.opcode == "bra" && i.predicate.as_deref() == Some(idle.as_str()))
            .unwrap_or_else(|| panic!("{}: idle threads never branch away", kernel.entry()));
        let first_chase_load = body
            .iter()
            .position(|i| i.opcode == expected_load(kernel))
            .expect("chase load");
        assert!(
            exit < first_chase_load,
            "{}: other threads reach the chase",
            kernel.entry()
        );
    }
}

#[test]
fn dsmem_chase_reads_the_shared_memory_of_cluster_rank_1() {
    let kernel = catalogue::chase_fine_dsmem();
    let module = parse_module(kernel.module().ptx());
    let body: Vec<Instruction> = module
        .entry(kernel.entry())
        .instructions()
        .cloned()
        .collect();
    let mapa = body
        .iter()
        .position(|i| i.opcode.starts_with("mapa"))
        .expect("chase_fine_dsmem maps an address into another CTA");
    assert_eq!(body[mapa].operands[2], "1", "the chased CTA is rank 1");
    let remote = body[mapa].defs()[0].clone();
    // Everything computed from the mapped base after the mapping, loops included.
    let mut derived = vec![remote.clone()];
    for _ in 0..2 {
        for instruction in &body[mapa + 1..] {
            if instruction.uses().iter().any(|u| derived.contains(u)) {
                derived.extend(instruction.defs());
            }
        }
    }
    let timed_loads: Vec<&Instruction> = body
        .iter()
        .filter(|i| i.opcode == expected_load(kernel))
        .collect();
    assert!(!timed_loads.is_empty());
    for load in timed_loads {
        let address = Instruction::registers_in(load.operands.last().expect("address"));
        assert!(
            address.iter().any(|r| derived.contains(r)),
            "{address:?} does not derive from {remote}"
        );
    }
    // The source of the mapping is this CTA's own chain copy in shared memory.
    let source = &body[mapa].operands[1];
    assert!(
        body[..mapa]
            .iter()
            .any(|i| i.opcode == "cvta.shared.u64" && i.operands[0] == *source),
        "mapa's source {source} is not a generic shared-memory address"
    );
}

/// The pinned chase reads `%smid`, claims its slot with a compare-and-swap and counts
/// itself in before the first chase load, waits in a loop that reads the count atomically
/// and is bounded by `%clock64`; after a barrier every warp has an untimed warm-up loop,
/// after a second barrier a timed loop over the `.cg` load bracketed by `%clock64`, and
/// after a third the sampled loads, each between two `%clock` reads.
#[test]
fn the_pinned_chase_claims_its_sm_before_it_chases() {
    let kernel = catalogue::chase_pinned_global_cg();
    let module = parse_module(kernel.module().ptx());
    let entry = module.entry(kernel.entry());
    let body: Vec<Instruction> = entry.instructions().cloned().collect();
    let position = |what: &str, test: &dyn Fn(&Instruction) -> bool| {
        body.iter()
            .position(test)
            .unwrap_or_else(|| panic!("no {what}"))
    };
    let smid = position("%smid read", &|i| i.operands.iter().any(|o| o == "%smid"));
    let cas = position("claim", &|i| i.opcode == "atom.global.cas.b32");
    let count = position("count", &|i| i.opcode == "atom.global.add.u32");
    let load = position("chase load", &|i| i.opcode == "ld.global.cg.u32");
    assert!(
        smid < cas && cas < count && count < load,
        "{smid} {cas} {count} {load}"
    );
    let barriers: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, i)| i.opcode.starts_with("bar"))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(barriers.len(), 3, "publish, warmed, timed");
    assert!(
        count < barriers[0] && barriers[0] < load,
        "claim, then chase"
    );
    let loops = entry.loops();
    let wait = loops
        .iter()
        .find(|body| body.iter().any(|i| i.opcode == "atom.global.add.u32"))
        .expect("a wait loop");
    assert!(
        wait.iter().any(Instruction::is_clock64_read),
        "bounded wait"
    );
    assert!(!wait.iter().any(|i| i.opcode == "ld.global.cg.u32"));
    // The warm-up loop and the coarse timed loop, whose %clock64 reads are outside it.
    assert_eq!(untimed_loops_loading(kernel, "ld.global.cg.u32"), 2);
    let loads: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, i)| i.opcode == "ld.global.cg.u32")
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        loads.len(),
        4,
        "warm-up, timed pass, the other warps' paced loads, samples"
    );
    let clock64: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, i)| i.is_clock64_read())
        .map(|(k, _)| k)
        .filter(|&k| k > barriers[1])
        .collect();
    assert!(
        clock64.len() == 2 && clock64[0] < loads[1] && loads[1] < clock64[1],
        "the timed pass between two %clock64 reads: {clock64:?} {loads:?}"
    );
    assert!(
        barriers[1] < loads[1]
            && loads[1] < barriers[2]
            && barriers[2] < loads[2]
            && loads[2] < loads[3],
        "warm-up, barrier, timed pass, barrier, the other warps' loads and the samples"
    );
    let clock32: Vec<usize> = body
        .iter()
        .enumerate()
        .filter(|(_, i)| i.is_clock32_read())
        .map(|(k, _)| k)
        .collect();
    // The other warps' loads are paced exactly like the samples: each between two %clock
    // reads.
    assert!(
        clock32.len() == 4
            && clock32[0] < loads[2]
            && loads[2] < clock32[1]
            && clock32[2] < loads[3]
            && loads[3] < clock32[3],
        "each paced and each sampled load between two %clock reads: {clock32:?}"
    );
}
