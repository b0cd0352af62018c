//! Times every launch shape of the bandwidth search's space with long launches on GPU 0:
//! the ceiling of memtopo's streaming kernels, against which its tuner's pick is judged
//!. Prints, per level, the shapes ranked by their median, with the best
//! repetition and the fraction of the API peak where the level has one. With no GPU it
//! prints why and exits with status 2.
//!
//! ```text
//! cargo run --release -p pchase-runner --example bandwidth_sweep -- [LEVEL...] [--top N] [--repetitions N]
//! ```
//!
//! LEVEL is one of `memory-read`, `memory-write`, `memory-copy`, `l2-read`, `l2-write`,
//! `l2-near` (default: the three memory levels).

use std::{process::ExitCode, time::Duration};

use pchase_runner::{
    bandwidth::BandwidthLevel,
    cuda::CudaBackend,
    measure::bandwidth::{api_memory_peak, LevelPlan, FINAL_LAUNCH},
    Backend, RunnerError,
};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ (RunnerError::NoDevice | RunnerError::NoDriver(_))) => {
            eprintln!("bandwidth_sweep: skipped: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("bandwidth_sweep: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn level(name: &str) -> Result<BandwidthLevel, RunnerError> {
    Ok(match name {
        "memory-read" => BandwidthLevel::MemoryRead,
        "memory-write" => BandwidthLevel::MemoryWrite,
        "memory-copy" => BandwidthLevel::MemoryCopy,
        "l2-read" => BandwidthLevel::L2,
        "l2-write" => BandwidthLevel::L2Write,
        "l2-near" => BandwidthLevel::L2Near,
        other => {
            return Err(RunnerError::InvalidRequest(format!(
                "unknown level `{other}` (memory-read, memory-write, memory-copy, l2-read, l2-write, l2-near)"
            )))
        }
    })
}

fn number(args: &mut impl Iterator<Item = String>, flag: &str) -> Result<usize, RunnerError> {
    args.next()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| RunnerError::InvalidRequest(format!("{flag} needs a positive number")))
}

fn run() -> Result<(), RunnerError> {
    let mut levels = Vec::new();
    let (mut top, mut repetitions) = (12, 3);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--top" => top = number(&mut args, "--top")?,
            "--repetitions" => repetitions = number(&mut args, "--repetitions")?,
            name => levels.push(level(name)?),
        }
    }
    if levels.is_empty() {
        levels = vec![
            BandwidthLevel::MemoryRead,
            BandwidthLevel::MemoryWrite,
            BandwidthLevel::MemoryCopy,
        ];
    }
    let repetitions = u32::try_from(repetitions).unwrap_or(u32::MAX);
    let mut gpu = CudaBackend::new(0)?;
    let device = gpu.device().clone();
    let sm_mhz = device
        .sm_clock_khz
        .map(|k| f64::from(k) / 1e3)
        .ok_or_else(|| RunnerError::InvalidRequest("the device reports no SM clock".into()))?;
    let peak = api_memory_peak(&device);
    println!(
        "{}: {} SMs; long launches of {:?}, {repetitions} timed each after one untimed",
        device.name, device.sm_count, FINAL_LAUNCH
    );
    for level in levels {
        let plan = LevelPlan::new(level, &device, sm_mhz, None, None)?;
        let mut timed = Vec::new();
        let mut gpu_time = Duration::ZERO;
        for shape in plan.space.shapes() {
            let request = plan.request(shape, device.sm_count, FINAL_LAUNCH, repetitions, true);
            let run = gpu.bandwidth(&request)?;
            gpu_time += run.gpu_time;
            if let Some((best, median)) = run
                .best_bytes_per_second()
                .zip(run.median_bytes_per_second())
            {
                timed.push((shape, best, median));
            }
        }
        timed.sort_by(|a, b| b.2.total_cmp(&a.2));
        println!(
            "\n{level}: {} shapes in {:.2} s of GPU time, the best {} by median:",
            timed.len(),
            gpu_time.as_secs_f64(),
            top.min(timed.len())
        );
        let memory = level.element() == topology::ElementKind::DeviceMemory;
        for (shape, best, median) in timed.iter().take(top) {
            let fraction = match (memory, peak) {
                (true, Some(p)) => format!(" ({:.1} % of the API peak)", 100.0 * best / p),
                _ => String::new(),
            };
            println!(
                "  {shape}: best {:.1} GB/s{fraction}, median {:.1}",
                best / 1e9,
                median / 1e9
            );
        }
    }
    Ok(())
}
