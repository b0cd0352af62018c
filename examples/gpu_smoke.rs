//! Loads every PTX module on GPU 0 and runs a short chase through each load path,
//! printing the median latency; with no GPU it prints why and exits with status 2.
//!
//! ```text
//! cargo run --release -p pchase-runner --example gpu_smoke
//! ```

use std::process::ExitCode;

use pchase_runner::{
    cuda::CudaBackend, Backend, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath, RunnerError,
};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (RunnerError::NoDevice | RunnerError::NoDriver(_))) => {
            eprintln!("gpu_smoke: skipped: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("gpu_smoke: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), RunnerError> {
    let mut gpu = CudaBackend::new(0)?;
    let info = gpu.device().clone();
    println!(
        "{} (compute capability {}, {} SMs); modules loaded: {:?}",
        info.name,
        info.compute_capability,
        info.sm_count,
        gpu.loaded_modules()
    );
    for path in LoadPath::ALL {
        let request = ChaseRequest {
            path,
            mode: ChaseMode::Fine,
            chains: vec![ChainSpec::new(4096, 32)?],
            warmup_steps: 128,
            steps: 512,
            carveout: Carveout::DriverDefault,
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let run = gpu.chase(&request)?;
        let block = &run.blocks[0];
        let mut sorted = block.latencies.clone();
        sorted.sort_unstable();
        println!(
            "{path:>9}: SM {:>3}, chain checked, median {:>4} cycles, p95 {:>4} cycles",
            block.smid,
            sorted[sorted.len() / 2],
            sorted[sorted.len() * 95 / 100]
        );
    }
    println!(
        "clock overhead {} cycles; SM clock {:.0} MHz",
        gpu.clock_overhead(256)?,
        gpu.measure_sm_clock_mhz()?
    );
    Ok(())
}
