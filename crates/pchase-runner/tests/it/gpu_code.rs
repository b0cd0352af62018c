//! On a GPU: every module loads from the cubin of the GPU's compute capability where memtopo
//! ships one (nothing JIT-compiled), from its PTX where it does not, and from its PTX always
//! with the preference `MEMTOPO_JIT=1` sets; both forms follow a chain and time the clock.
//! Without a GPU it says it skipped.

#![cfg(feature = "cuda")]

use pchase_kernels::{cubin, ComputeCapability};
use pchase_runner::{
    cuda::{CodePreference, CudaBackend, ModuleCode, PtxReason},
    Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath,
};

use crate::gpu::{gpu_with_or_skip, Gpu};

/// A fine chase through the L1 path (the backend checks every index against the chain)
/// and the clock overhead, as the table prints them.
fn measure(gpu: &mut Gpu) -> (u32, u32) {
    let request = ChaseRequest {
        path: LoadPath::GlobalCa,
        mode: ChaseMode::Fine,
        chains: vec![ChainSpec::new(2048, 32).expect("chain")],
        warmup_steps: 128,
        steps: 256,
        carveout: Carveout::DriverDefault,
        flush_l2: false,
        reserve_shared_bytes: 0,
        written_bytes: 0,
    };
    let run = gpu.chase(&request).expect("chase");
    let mut latencies = run.blocks[0].latencies.clone();
    latencies.sort_unstable();
    let overhead = gpu.clock_overhead(256).expect("clock overhead");
    (latencies[latencies.len() / 2], overhead)
}

#[test]
fn modules_load_from_the_cubin_of_the_gpus_capability() {
    let Some(mut gpu) =
        gpu_with_or_skip("modules_load_from_the_cubin_of_the_gpus_capability", |i| {
            CudaBackend::with_code(i, CodePreference::Cubin)
        })
    else {
        return;
    };
    let cc = ComputeCapability::from(gpu.device().compute_capability);
    let listed = cubin::ARCHITECTURES.contains(&cc);
    let driver = gpu.device().driver_version.unwrap_or(0);
    let loads = gpu.module_loads().to_vec();
    assert_eq!(loads.len(), gpu.loaded_modules().len(), "{loads:?}");
    for (name, code) in &loads {
        match code {
            ModuleCode::Cubin(of) => assert_eq!(*of, cc, "{name}"),
            ModuleCode::Ptx(PtxReason::NoCubin) => assert!(!listed, "{name}: {cc} is listed"),
            // The cubins come from ptxas 12.9: every CUDA 12 or newer driver loads them.
            ModuleCode::Ptx(PtxReason::Refused) => {
                assert!(driver < 12000, "{name}: driver {driver} refused the cubin")
            }
            ModuleCode::Ptx(PtxReason::Forced) => panic!("{name}: JIT not asked for"),
        }
    }
    let (latency, overhead) = measure(&mut gpu);
    eprintln!(
        "{} (cc {cc}, driver {driver}): {loads:?}; L1 hit {latency} cycles, clock overhead \
         {overhead} cycles",
        gpu.device().name
    );
}

#[test]
fn a_forced_jit_loads_every_module_from_its_ptx() {
    let Some(mut gpu) = gpu_with_or_skip("a_forced_jit_loads_every_module_from_its_ptx", |i| {
        CudaBackend::with_code(i, CodePreference::Ptx)
    }) else {
        return;
    };
    let loads = gpu.module_loads().to_vec();
    assert!(!loads.is_empty());
    assert_eq!(loads.len(), gpu.loaded_modules().len(), "{loads:?}");
    assert!(
        loads
            .iter()
            .all(|(_, code)| *code == ModuleCode::Ptx(PtxReason::Forced)),
        "{loads:?}"
    );
    let (latency, overhead) = measure(&mut gpu);
    eprintln!(
        "{} from PTX: L1 hit {latency} cycles, clock overhead {overhead} cycles",
        gpu.device().name
    );
}
