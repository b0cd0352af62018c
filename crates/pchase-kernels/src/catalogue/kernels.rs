//! The kernel descriptions: the chases by path and granularity, the two-phase kernels by
//! path pair, and the single kernels.

use super::params::*;
use super::{HOPPER, L2MAP, MAP_SHARED_HEADER, PCHASE, PINNED_SHARED_HEADER, TWO_PHASE_PATHS};
use crate::kernel::{Granularity, Kernel, KernelKind, Param, SharedLayout};
use crate::{ComputeCapability, LoadPath};

const fn chase_kernel(entry: &'static str, path: LoadPath, granularity: Granularity) -> Kernel {
    let shared_layout = match (granularity, path) {
        (Granularity::Fine, LoadPath::Shared) => SharedLayout::TimingsThenChain,
        (Granularity::Fine, _) => SharedLayout::Timings,
        (Granularity::Coarse, LoadPath::Shared) => SharedLayout::Chain,
        (Granularity::Coarse, _) => SharedLayout::None,
    };
    let params: &'static [Param] = match granularity {
        Granularity::Fine => &FINE_PARAMS,
        Granularity::Coarse => &COARSE_PARAMS,
    };
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::Chase { path, granularity },
        params,
        min_capability: ComputeCapability::SM_50,
        shared_layout,
        cluster_dims: None,
    }
}

/// Chase kernels indexed by `chase_index(path, granularity)`.
pub(super) static CHASE: [Kernel; 12] = [
    chase_kernel("chase_global_ca", LoadPath::GlobalCa, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_ca",
        LoadPath::GlobalCa,
        Granularity::Fine,
    ),
    chase_kernel("chase_global_cg", LoadPath::GlobalCg, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_cg",
        LoadPath::GlobalCg,
        Granularity::Fine,
    ),
    chase_kernel("chase_global_nc", LoadPath::GlobalNc, Granularity::Coarse),
    chase_kernel(
        "chase_fine_global_nc",
        LoadPath::GlobalNc,
        Granularity::Fine,
    ),
    chase_kernel("chase_texture", LoadPath::Texture, Granularity::Coarse),
    chase_kernel("chase_fine_texture", LoadPath::Texture, Granularity::Fine),
    chase_kernel("chase_constant", LoadPath::Constant, Granularity::Coarse),
    chase_kernel("chase_fine_constant", LoadPath::Constant, Granularity::Fine),
    chase_kernel("chase_shared", LoadPath::Shared, Granularity::Coarse),
    chase_kernel("chase_fine_shared", LoadPath::Shared, Granularity::Fine),
];

pub(super) fn chase_index(path: LoadPath, granularity: Granularity) -> usize {
    let path_index = match path {
        LoadPath::GlobalCa => 0,
        LoadPath::GlobalCg => 1,
        LoadPath::GlobalNc => 2,
        LoadPath::Texture => 3,
        LoadPath::Constant => 4,
        LoadPath::Shared => 5,
    };
    let granularity_index = match granularity {
        Granularity::Coarse => 0,
        Granularity::Fine => 1,
    };
    2 * path_index + granularity_index
}

const fn two_phase_kernel(entry: &'static str, first: LoadPath, second: LoadPath) -> Kernel {
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::TwoPhase { first, second },
        params: &TWO_PHASE_PARAMS,
        min_capability: ComputeCapability::SM_50,
        shared_layout: SharedLayout::Timings,
        cluster_dims: None,
    }
}

/// Two-phase kernels indexed by `two_phase_index(first, second)`: `first` major, both in
/// the order of [`TWO_PHASE_PATHS`].
pub(super) static TWO_PHASE: [Kernel; 25] = {
    use LoadPath::{Constant, GlobalCa, GlobalCg, GlobalNc, Texture};
    [
        two_phase_kernel("two_phase_global_ca_global_ca", GlobalCa, GlobalCa),
        two_phase_kernel("two_phase_global_ca_global_cg", GlobalCa, GlobalCg),
        two_phase_kernel("two_phase_global_ca_global_nc", GlobalCa, GlobalNc),
        two_phase_kernel("two_phase_global_ca_texture", GlobalCa, Texture),
        two_phase_kernel("two_phase_global_ca_constant", GlobalCa, Constant),
        two_phase_kernel("two_phase_global_cg_global_ca", GlobalCg, GlobalCa),
        two_phase_kernel("two_phase_global_cg_global_cg", GlobalCg, GlobalCg),
        two_phase_kernel("two_phase_global_cg_global_nc", GlobalCg, GlobalNc),
        two_phase_kernel("two_phase_global_cg_texture", GlobalCg, Texture),
        two_phase_kernel("two_phase_global_cg_constant", GlobalCg, Constant),
        two_phase_kernel("two_phase_global_nc_global_ca", GlobalNc, GlobalCa),
        two_phase_kernel("two_phase_global_nc_global_cg", GlobalNc, GlobalCg),
        two_phase_kernel("two_phase_global_nc_global_nc", GlobalNc, GlobalNc),
        two_phase_kernel("two_phase_global_nc_texture", GlobalNc, Texture),
        two_phase_kernel("two_phase_global_nc_constant", GlobalNc, Constant),
        two_phase_kernel("two_phase_texture_global_ca", Texture, GlobalCa),
        two_phase_kernel("two_phase_texture_global_cg", Texture, GlobalCg),
        two_phase_kernel("two_phase_texture_global_nc", Texture, GlobalNc),
        two_phase_kernel("two_phase_texture_texture", Texture, Texture),
        two_phase_kernel("two_phase_texture_constant", Texture, Constant),
        two_phase_kernel("two_phase_constant_global_ca", Constant, GlobalCa),
        two_phase_kernel("two_phase_constant_global_cg", Constant, GlobalCg),
        two_phase_kernel("two_phase_constant_global_nc", Constant, GlobalNc),
        two_phase_kernel("two_phase_constant_texture", Constant, Texture),
        two_phase_kernel("two_phase_constant_constant", Constant, Constant),
    ]
};

/// The L2 line probe's block-filled two-phase chase (`KernelKind::TwoPhaseBlock`).
pub(super) static TWO_PHASE_BLOCK: Kernel = Kernel {
    module: &PCHASE,
    entry: "two_phase_block_global_cg",
    kind: KernelKind::TwoPhaseBlock,
    params: &TWO_PHASE_BLOCK_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::Timings,
    cluster_dims: None,
};

pub(super) fn two_phase_path_index(path: LoadPath) -> Option<usize> {
    TWO_PHASE_PATHS.iter().position(|&p| p == path)
}

const fn lines_kernel(entry: &'static str, path: LoadPath) -> Kernel {
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::ChaseLines { path },
        params: &LINES_PARAMS,
        min_capability: ComputeCapability::SM_50,
        shared_layout: SharedLayout::Timings,
        cluster_dims: None,
    }
}

/// The line-indexed chases, in the order of [`super::LINES_PATHS`].
pub(super) static CHASE_LINES: [Kernel; 2] = [
    lines_kernel("chase_fine_lines_global_ca", LoadPath::GlobalCa),
    lines_kernel("chase_fine_lines_global_cg", LoadPath::GlobalCg),
];

pub(super) static INIT_CHAIN_LINES: Kernel = Kernel {
    module: &PCHASE,
    entry: "init_chain_lines",
    kind: KernelKind::InitChainLines,
    params: &INIT_CHAIN_LINES_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

pub(super) static INIT_CHAIN: Kernel = Kernel {
    module: &PCHASE,
    entry: "init_chain",
    kind: KernelKind::InitChain,
    params: &INIT_CHAIN_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

pub(super) static CLOCK_OVERHEAD: Kernel = Kernel {
    module: &PCHASE,
    entry: "clock_overhead",
    kind: KernelKind::ClockOverhead,
    params: &CLOCK_OVERHEAD_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::Timings,
    cluster_dims: None,
};

pub(super) static SM_CLOCK: Kernel = Kernel {
    module: &PCHASE,
    entry: "sm_clock",
    kind: KernelKind::SmClock,
    params: &SM_CLOCK_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

/// The pinned `.cg` chase with several independent chains per warp (memory-level
/// parallelism past 32 chains per SM): 2, 4 and 8 chains.
pub(super) static CHASE_PINNED_MULTI: [Kernel; 3] = [
    pinned_multi("chase_pinned_global_cg_x2", 2),
    pinned_multi("chase_pinned_global_cg_x4", 4),
    pinned_multi("chase_pinned_global_cg_x8", 8),
];

const fn pinned_multi(entry: &'static str, chains: u32) -> Kernel {
    Kernel {
        module: &PCHASE,
        entry,
        kind: KernelKind::ChasePinnedMulti { chains },
        params: &PINNED_PARAMS,
        min_capability: ComputeCapability::SM_50,
        shared_layout: SharedLayout::HeaderThenTimings {
            header: PINNED_SHARED_HEADER,
        },
        cluster_dims: None,
    }
}

pub(super) static CHASE_PINNED_GLOBAL_CG: Kernel = Kernel {
    module: &PCHASE,
    entry: "chase_pinned_global_cg",
    kind: KernelKind::ChasePinned {
        path: LoadPath::GlobalCg,
    },
    params: &PINNED_PARAMS,
    min_capability: ComputeCapability::SM_50,
    shared_layout: SharedLayout::HeaderThenTimings {
        header: PINNED_SHARED_HEADER,
    },
    cluster_dims: None,
};

pub(super) static L2_PARTITION_MAP: Kernel = Kernel {
    module: &L2MAP,
    entry: "l2_partition_map",
    kind: KernelKind::PartitionMap,
    params: &MAP_PARAMS,
    min_capability: ComputeCapability::SM_70,
    shared_layout: SharedLayout::HeaderThenTimings {
        header: MAP_SHARED_HEADER,
    },
    cluster_dims: None,
};

pub(super) static CHASE_FINE_DSMEM: Kernel = Kernel {
    module: &HOPPER,
    entry: "chase_fine_dsmem",
    kind: KernelKind::ChaseDistributedShared,
    params: &DSMEM_PARAMS,
    min_capability: ComputeCapability::SM_90,
    shared_layout: SharedLayout::TimingsThenChain,
    cluster_dims: Some([2, 1, 1]),
};
