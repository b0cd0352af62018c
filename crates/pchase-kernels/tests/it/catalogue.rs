//! Lookups, launch contracts and errors of the catalogue.

use std::collections::HashSet;

use pchase_kernels::{
    catalogue, ChainArgument, ComputeCapability, Error, Granularity, KernelKind, LoadPath,
    ParamType, SharedLayout,
};

#[test]
fn chase_lookup_returns_the_kernel_of_that_path_and_granularity() {
    for path in LoadPath::ALL {
        for granularity in Granularity::ALL {
            let kernel = catalogue::chase(path, granularity);
            assert_eq!(kernel.kind(), KernelKind::Chase { path, granularity });
            let expected = match granularity {
                Granularity::Fine => format!("chase_fine_{}", path.name()),
                Granularity::Coarse => format!("chase_{}", path.name()),
            };
            assert_eq!(kernel.entry(), expected);
            assert_eq!(kernel.module().name(), "pchase");
        }
    }
}

#[test]
fn entry_names_are_unique_and_found_by_name() {
    let mut seen = HashSet::new();
    for kernel in catalogue::kernels() {
        assert!(
            seen.insert(kernel.entry()),
            "duplicate entry {}",
            kernel.entry()
        );
        let found = catalogue::kernel_by_entry(kernel.entry()).expect("found");
        assert!(std::ptr::eq(found, kernel));
    }
    let two_phase = catalogue::TWO_PHASE_PATHS.len() * catalogue::TWO_PHASE_PATHS.len();
    // init_chain, clock_overhead, sm_clock, two_phase_block_global_cg,
    // chase_pinned_global_cg, chase_fine_dsmem,
    // l2_partition_map, dsmem_cluster_chase, dsmem_cluster_stream, the pinned chases with
    // 2, 4 and 8 chains per warp, the line-indexed chases and init_chain_lines, then the
    // bandwidth kernels, one copy kernel per copy path, icache_ffma and the probes.
    let bandwidth = pchase_kernels::bandwidth::kernels().count();
    let copies = pchase_kernels::copy::CopyPath::ALL.len();
    let lines = catalogue::LINES_PATHS.len();
    let probes = pchase_kernels::probes::kernels().count();
    assert_eq!(
        seen.len(),
        2 * LoadPath::ALL.len() + 10 + 3 + two_phase + lines + bandwidth + copies + 1 + probes
    );
    assert!(catalogue::kernel_by_entry("chase_fine_l1").is_none());
}

#[test]
fn fine_and_coarse_parameters_follow_the_specification() {
    let names =
        |k: &pchase_kernels::Kernel| k.params().iter().map(|p| p.name()).collect::<Vec<_>>();
    for path in LoadPath::ALL {
        let fine = catalogue::chase(path, Granularity::Fine);
        assert_eq!(
            names(fine),
            [
                "chain",
                "block_stride",
                "shared_nodes_elems",
                "warmup_steps",
                "steps",
                "out_latency",
                "out_index",
                "out_block"
            ]
        );
        let coarse = catalogue::chase(path, Granularity::Coarse);
        assert_eq!(
            names(coarse),
            [
                "chain",
                "block_stride",
                "shared_nodes_elems",
                "warmup_steps",
                "steps",
                "out_cycles",
                "out_block"
            ]
        );
        let types: Vec<ParamType> = fine.params().iter().map(|p| p.ty()).collect();
        use ParamType::{U32, U64};
        assert_eq!(types, [U64, U64, U32, U32, U32, U64, U64, U64]);
    }
    assert_eq!(
        names(catalogue::init_chain()),
        ["chain", "block_stride", "nodes", "stride", "node_words"]
    );
    assert_eq!(names(catalogue::clock_overhead()), ["samples", "out"]);
    assert_eq!(names(catalogue::sm_clock()), ["spin_cycles", "out"]);
    assert_eq!(
        names(catalogue::chase_fine_dsmem()),
        names(catalogue::chase(LoadPath::Shared, Granularity::Fine))
    );
    assert_eq!(
        catalogue::chase(LoadPath::Texture, Granularity::Fine).param_index("steps"),
        Some(4)
    );
}

#[test]
fn chain_argument_depends_on_the_path() {
    assert_eq!(
        LoadPath::Texture.chain_argument(),
        ChainArgument::TextureObject
    );
    assert_eq!(LoadPath::Constant.chain_argument(), ChainArgument::Unused);
    assert_eq!(
        LoadPath::GlobalNc.chain_argument(),
        ChainArgument::DevicePointer
    );
}

#[test]
fn dynamic_shared_bytes_follow_each_layout() {
    let steps = 1000;
    let chain = 4096;
    for path in LoadPath::ALL {
        let fine = catalogue::chase(path, Granularity::Fine)
            .dynamic_shared_bytes(steps, chain)
            .unwrap();
        let coarse = catalogue::chase(path, Granularity::Coarse)
            .dynamic_shared_bytes(steps, chain)
            .unwrap();
        if path == LoadPath::Shared {
            assert_eq!(fine, 8 * steps + 4 * chain);
            assert_eq!(coarse, 4 * chain);
        } else {
            assert_eq!(fine, 8 * steps);
            assert_eq!(coarse, 0);
        }
    }
    assert_eq!(
        catalogue::chase_fine_dsmem()
            .dynamic_shared_bytes(steps, chain)
            .unwrap(),
        8 * steps + 4 * chain
    );
    assert_eq!(
        catalogue::clock_overhead()
            .dynamic_shared_bytes(steps, chain)
            .unwrap(),
        8 * steps
    );
    assert_eq!(
        catalogue::sm_clock()
            .dynamic_shared_bytes(steps, chain)
            .unwrap(),
        0
    );
    assert_eq!(
        catalogue::init_chain()
            .dynamic_shared_bytes(steps, chain)
            .unwrap(),
        0
    );
    assert_eq!(
        SharedLayout::TimingsThenChain.chain_offset_bytes(steps),
        Some(8 * u64::from(steps))
    );
    assert_eq!(SharedLayout::Chain.chain_offset_bytes(steps), Some(0));
}

#[test]
fn dynamic_shared_bytes_beyond_u32_is_an_error() {
    let kernel = catalogue::chase(LoadPath::Shared, Granularity::Fine);
    let error = kernel.dynamic_shared_bytes(u32::MAX, u32::MAX).unwrap_err();
    assert_eq!(
        error,
        Error::SharedMemoryOverflow {
            entry: "chase_fine_shared",
            steps: u32::MAX,
            shared_chain_elems: u32::MAX
        }
    );
    // The largest count that still fits.
    let max_steps = u32::MAX / 8;
    assert_eq!(
        catalogue::clock_overhead().dynamic_shared_bytes(max_steps, 0),
        Ok(8 * max_steps)
    );
    assert!(catalogue::clock_overhead()
        .dynamic_shared_bytes(max_steps + 1, 0)
        .is_err());
}

#[test]
fn capability_checks_use_the_kernel_minimum() {
    let maxwell = ComputeCapability::new(5, 0);
    let ampere = ComputeCapability::new(8, 6);
    let hopper = ComputeCapability::new(9, 0);
    for kernel in catalogue::kernels_of(catalogue::pchase_module()) {
        assert_eq!(
            kernel.check_supported(maxwell),
            Ok(()),
            "{}",
            kernel.entry()
        );
    }
    let dsmem = catalogue::chase_fine_dsmem();
    assert_eq!(dsmem.check_supported(hopper), Ok(()));
    let error = dsmem.check_supported(ampere).unwrap_err();
    assert_eq!(
        error,
        Error::UnsupportedCapability {
            entry: "chase_fine_dsmem",
            required: hopper,
            found: ampere
        }
    );
    assert_eq!(
        error.to_string(),
        "kernel `chase_fine_dsmem` needs compute capability 9.0 or newer, the device has 8.6"
    );
    assert!(!catalogue::hopper_module().supports(ampere));
    assert!(catalogue::pchase_module().supports(ComputeCapability::new(10, 0)));
    assert!(!catalogue::pchase_module().supports(ComputeCapability::new(3, 5)));
}

#[test]
fn modules_list_covers_every_kernel_module() {
    let modules = catalogue::modules();
    assert_eq!(modules.len(), 8);
    for kernel in catalogue::kernels() {
        assert!(modules.iter().any(|m| std::ptr::eq(*m, kernel.module())));
    }
    let per_module: usize = modules
        .iter()
        .map(|m| catalogue::kernels_of(m).count())
        .sum();
    assert_eq!(per_module, catalogue::kernels().count());
    assert_eq!(
        catalogue::chase_fine_dsmem().cluster_dims(),
        Some([2, 1, 1])
    );
    // The partition map sleeps between polls: Volta and newer only.
    let map = catalogue::l2map_module();
    assert!(!map.supports(ComputeCapability::new(6, 1)));
    assert!(map.supports(ComputeCapability::new(7, 0)));
    assert!(std::ptr::eq(catalogue::l2_partition_map().module(), map));
}

#[test]
fn pinned_and_map_shared_memory_is_a_header_then_the_timings() {
    let pinned = catalogue::chase_pinned_global_cg();
    assert_eq!(
        pinned.dynamic_shared_bytes(0, 0).unwrap(),
        catalogue::PINNED_SHARED_HEADER
    );
    assert_eq!(
        pinned.dynamic_shared_bytes(100, 0).unwrap(),
        catalogue::PINNED_SHARED_HEADER + 800
    );
    let map = catalogue::l2_partition_map();
    assert_eq!(
        map.dynamic_shared_bytes(1024, 0).unwrap(),
        catalogue::MAP_SHARED_HEADER + 8192
    );
}

#[test]
fn two_phase_lookup_covers_every_ordered_pair_of_the_five_paths() {
    let paths = [
        LoadPath::GlobalCa,
        LoadPath::GlobalCg,
        LoadPath::GlobalNc,
        LoadPath::Texture,
        LoadPath::Constant,
    ];
    assert_eq!(catalogue::TWO_PHASE_PATHS, paths);
    let mut entries = HashSet::new();
    for first in paths {
        for second in paths {
            let kernel = catalogue::two_phase(first, second).expect("pair exists");
            assert_eq!(kernel.kind(), KernelKind::TwoPhase { first, second });
            assert_eq!(
                kernel.entry(),
                format!("two_phase_{}_{}", first.name(), second.name())
            );
            assert_eq!(kernel.module().name(), "pchase");
            assert_eq!(kernel.min_capability(), ComputeCapability::SM_50);
            assert_eq!(kernel.cluster_dims(), None);
            assert!(entries.insert(kernel.entry()));
        }
    }
    let in_catalogue = catalogue::kernels()
        .filter(|k| matches!(k.kind(), KernelKind::TwoPhase { .. }))
        .count();
    assert_eq!(in_catalogue, 25);
    assert_eq!(entries.len(), 25);
}

#[test]
fn two_phase_lookup_of_other_paths_is_an_error() {
    for other in [LoadPath::Shared] {
        for path in LoadPath::ALL {
            for (first, second) in [(other, path), (path, other)] {
                assert_eq!(
                    catalogue::two_phase(first, second).unwrap_err(),
                    Error::NoTwoPhaseKernel { first, second }
                );
            }
        }
    }
    let message = catalogue::two_phase(LoadPath::GlobalCa, LoadPath::Shared)
        .unwrap_err()
        .to_string();
    assert!(message.contains("global_ca then shared"), "{message}");
}

#[test]
fn two_phase_parameters_follow_the_specification() {
    use ParamType::{U32, U64};
    let expected = [
        ("chain_a", U64),
        ("block_stride_a", U64),
        ("chain_b", U64),
        ("block_stride_b", U64),
        ("thread_a", U32),
        ("thread_b", U32),
        ("warmup_a", U32),
        ("warmup_b", U32),
        ("steps", U32),
        ("out_latency", U64),
        ("out_index", U64),
        ("out_block", U64),
    ];
    for first in catalogue::TWO_PHASE_PATHS {
        for second in catalogue::TWO_PHASE_PATHS {
            let kernel = catalogue::two_phase(first, second).unwrap();
            let params: Vec<(&str, ParamType)> =
                kernel.params().iter().map(|p| (p.name(), p.ty())).collect();
            assert_eq!(params, expected, "{}", kernel.entry());
            // The constant path's chain argument is an offset, unlike the chase kernels'.
            for name in ["chain_a", "chain_b"] {
                let meaning = kernel.params()[kernel.param_index(name).unwrap()].meaning();
                assert!(
                    meaning.contains("ELEMENT OFFSET") || meaning.contains("element offset"),
                    "{name}: {meaning}"
                );
            }
        }
    }
}

#[test]
fn two_phase_shared_memory_holds_the_timings_of_chain_a() {
    for first in catalogue::TWO_PHASE_PATHS {
        for second in catalogue::TWO_PHASE_PATHS {
            let kernel = catalogue::two_phase(first, second).unwrap();
            assert_eq!(kernel.shared_layout(), SharedLayout::Timings);
            assert_eq!(kernel.dynamic_shared_bytes(1000, 4096), Ok(8000));
            assert_eq!(kernel.dynamic_shared_bytes(0, 0), Ok(0));
            assert!(matches!(
                kernel.dynamic_shared_bytes(u32::MAX / 8 + 1, 0),
                Err(Error::SharedMemoryOverflow { .. })
            ));
        }
    }
}
