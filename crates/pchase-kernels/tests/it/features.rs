//! Instruction-set limits: only `hopper` uses sm_90 features, and `pchase` stays within what
//! PTX ISA 7.0 on sm_50 offers.

use pchase_kernels::{catalogue, ComputeCapability, KernelKind};

use crate::ptx_text::{parse_module, Instruction, PtxModule};

/// Opcode parts, registers and directives that need sm_90 (clusters, TMA, warpgroups).
const SM_90_ONLY: &[&str] = &[
    "mapa",
    "::cluster",
    "barrier.cluster",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%clusterid",
    "%nclusterid",
    "%cluster_ctaid",
    "%is_explicit_cluster",
    ".reqnctapercluster",
    ".explicitcluster",
    ".maxclusterrank",
    "elect.sync",
    "cp.async.bulk",
    "wgmma",
    "setmaxnreg",
    "stmatrix",
    "fence.proxy",
    "griddepcontrol",
];

fn mentions(module: &PtxModule, token: &str) -> bool {
    module.entries.iter().any(|entry| {
        entry.directives.iter().any(|d| d.contains(token))
            || entry.instructions().any(|i: &Instruction| {
                i.opcode.contains(token) || i.operands.iter().any(|o| o.contains(token))
            })
    }) || module.declarations.iter().any(|d| d.contains(token))
}

#[test]
fn only_sm_90_modules_use_sm_90_features() {
    for module in catalogue::modules() {
        let parsed = parse_module(module.ptx());
        let used: Vec<&str> = SM_90_ONLY
            .iter()
            .copied()
            .filter(|token| mentions(&parsed, token))
            .collect();
        if module.min_capability() < ComputeCapability::SM_90 {
            assert!(
                used.is_empty(),
                "{} uses sm_90 features {used:?}",
                module.name()
            );
        } else {
            assert!(
                !used.is_empty(),
                "{} is sm_90-only but uses no sm_90 feature",
                module.name()
            );
        }
    }
}

#[test]
fn pchase_uses_only_instructions_of_isa_7_0_on_sm_50() {
    // Everything here exists since PTX ISA 3.1 on sm_35 or older (ld.global.nc: sm_32;
    // 32-bit global atom.cas / atom.add: sm_11; 64-bit shared atom.add: sm_20; integer
    // div, rem, mad and max of init_chain_lines' grouped order: PTX ISA 1.0, every target).
    const ALLOWED: &[&str] = &[
        "mov", "setp", "selp", "bra", "ret", "ld", "st", "tex", "cvta", "cvt", "mul", "add", "sub",
        "shl", "shr", "and", "or", "xor", "bar", "atom", "div", "rem", "mad", "max",
    ];
    let parsed = parse_module(catalogue::pchase_module().ptx());
    for entry in &parsed.entries {
        for instruction in entry.instructions() {
            let root = instruction.opcode.split('.').next().unwrap_or_default();
            assert!(
                ALLOWED.contains(&root),
                "{}: `{}` is not in the audited ISA 7.0 / sm_50 set",
                entry.name,
                instruction.opcode
            );
        }
    }
}

#[test]
fn only_kernels_that_copy_a_chain_or_run_phases_use_a_barrier() {
    // The partition map's SMs wait for each other through global atomics, not barriers.
    for kernel in catalogue::kernels() {
        let parsed = parse_module(kernel.module().ptx());
        let barriers = parsed
            .entry(kernel.entry())
            .instructions()
            .filter(|i| i.opcode.starts_with("bar"))
            .count();
        let copies_chain = kernel.shared_layout().chain_offset_bytes(1).is_some();
        // The pinned chase's warps wait for each other between warm-up, timed pass and
        // samples.
        let runs_phases = matches!(
            kernel.kind(),
            KernelKind::TwoPhase { .. }
                | KernelKind::TwoPhaseBlock
                | KernelKind::ChasePinned { .. }
                | KernelKind::ChasePinnedMulti { .. }
        );
        // The shared-memory bandwidth kernels fill their buffer before reading it.
        let fills_shared = kernel.shared_layout() == pchase_kernels::SharedLayout::Buffer;
        // The copy kernels whose threads copy wait for each other at every round's end;
        // the bulk copies' one thread waits on an mbarrier instead.
        let threads_copy =
            pchase_kernels::copy::path_of(kernel).is_some_and(|p| p.thread_width().is_some());
        assert_eq!(
            barriers > 0,
            copies_chain || runs_phases || fills_shared || threads_copy,
            "{}",
            kernel.entry()
        );
    }
}
