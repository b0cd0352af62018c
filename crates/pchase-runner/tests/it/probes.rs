//! Probes: the launch is checked against the catalogue before either backend runs it; the
//! simulated GPU answers with the benchmark's model and checks what the model wrote; the
//! bank-conflict benchmark recovers other truths than the shipped profiles' and says why it
//! measured nothing where the simulated GPU has no bank model. On a GPU, the probe runs.

use pchase_kernels::{catalogue, probes};
use pchase_runner::{
    measure::{bench, Selection, Session},
    sim::{SimBackend, SimProfile},
    Backend, ProbeArg, ProbeLaunch, ProbeModel, RunnerError, SimulatedGpu, SimulatedProbe,
};
use topology::RowValue;

use crate::pipeline::measure_only;

fn bank_launch(stride: u32) -> ProbeLaunch {
    ProbeLaunch::new(&probes::SHARED_BANK_CONFLICTS, 1, 32)
        .shared(32 * stride.max(4))
        .arg("out", ProbeArg::Buffer(vec![0; 34]))
        .arg("stride_bytes", ProbeArg::U32(stride))
        .arg("loads", ProbeArg::U32(64))
}

#[test]
fn launches_are_checked_against_the_catalogue() {
    assert!(bank_launch(4).check().is_ok());
    let refused = |launch: ProbeLaunch, expected: &str| {
        let err = launch.check().unwrap_err().to_string();
        assert!(err.contains(expected), "`{err}` lacks `{expected}`");
    };
    let mut not_a_probe = bank_launch(4);
    not_a_probe.kernel = catalogue::init_chain();
    refused(not_a_probe, "not a kernel of module `probes`");
    refused(
        ProbeLaunch::new(&probes::SHARED_BANK_CONFLICTS, 1, 0),
        "1 block(s) of 0 thread(s)",
    );
    refused(
        ProbeLaunch::new(&probes::SHARED_BANK_CONFLICTS, 1, 32)
            .arg("out", ProbeArg::Buffer(vec![0; 34])),
        "argument `stride_bytes` missing",
    );
    refused(
        bank_launch(4).arg("loads", ProbeArg::U32(8)),
        "argument `loads` given twice",
    );
    refused(
        bank_launch(4).arg("steps", ProbeArg::U32(8)),
        "no parameter `steps`",
    );
    let mut mistyped = bank_launch(4);
    mistyped.args[0].1 = ProbeArg::U32(0);
    refused(mistyped, "argument `out` does not fit its .u64 parameter");
    let mut empty = bank_launch(4);
    empty.args[0].1 = ProbeArg::Buffer(Vec::new());
    refused(empty, "buffer `out` is empty");
}

/// A model that writes a buffer of the wrong length.
struct ShortModel;

impl ProbeModel for ShortModel {
    fn simulate(
        &self,
        _gpu: &mut dyn SimulatedGpu,
        _launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError> {
        Ok(SimulatedProbe {
            buffers: vec![vec![0; 2]],
            cycles: 10,
        })
    }
}

/// A model that reports what the simulated GPU told it.
struct EchoModel;

impl ProbeModel for EchoModel {
    fn simulate(
        &self,
        gpu: &mut dyn SimulatedGpu,
        launch: &ProbeLaunch,
    ) -> Result<SimulatedProbe, RunnerError> {
        let shared = gpu
            .hit_latency(pchase_kernels::LoadPath::Shared)
            .unwrap_or(0);
        let has_truth = u32::from(gpu.truth("shared-banks").is_some());
        let mut out = vec![shared, has_truth];
        out.resize(launch.buffers()[0].len(), 7);
        Ok(SimulatedProbe {
            buffers: vec![out],
            cycles: 1_000_000,
        })
    }
}

#[test]
fn the_simulated_gpu_runs_the_model_and_checks_what_it_wrote() {
    let profile = SimProfile::bundled("h100").unwrap();
    let shared = profile.shared_memory.latency;
    let mut gpu = SimBackend::new(profile).unwrap();
    let run = gpu.probe(&bank_launch(8), &EchoModel).unwrap();
    assert_eq!(run.buffers[0][..3], [shared, 1, 7]);
    assert!(run.gpu_time.as_nanos() > 0);
    assert!(gpu.kernels_used().contains("shared_bank_conflicts"));
    let err = gpu.probe(&bank_launch(8), &ShortModel).unwrap_err();
    assert!(
        matches!(err, RunnerError::WrongResult(ref m) if m.contains("[2]") && m.contains("[34]")),
        "{err}"
    );
    // Kepler (compute capability 3.5) cannot run the probe.
    let mut kepler = SimBackend::new(SimProfile::bundled("kepler").unwrap()).unwrap();
    let err = kepler.probe(&bank_launch(8), &EchoModel).unwrap_err();
    assert!(matches!(err, RunnerError::Unsupported { .. }), "{err}");
}

#[test]
fn other_bank_layouts_are_recovered() {
    let banks = bench::find("shared-banks").expect("registered");
    for (period, cost) in [(64u32, 1.0f64), (256, 3.5), (128, 0.5)] {
        let mut profile = SimProfile::bundled("volta").unwrap();
        profile.benchmarks.insert(
            "shared-banks".into(),
            toml::from_str(&format!("period_bytes = {period}\ncycles_per_way = {cost}")).unwrap(),
        );
        let m = measure_only(&profile, "shared-banks");
        banks
            .sim_check(&profile, &m)
            .unwrap_or_else(|e| panic!("period {period}, cost {cost}: {e}"));
        let section = m.section("shared-banks").unwrap();
        // With a 256-byte period the largest stride is where the plateau begins.
        if period == 256 {
            assert!(section
                .row("stride_256")
                .unwrap()
                .label
                .contains("(32 ways)"));
        }
        assert_eq!(
            section.row("banks").unwrap().value,
            RowValue::count(period / 4, topology::Provenance::Derived)
        );
    }
}

#[test]
fn without_a_bank_model_the_benchmark_says_why() {
    let profile = SimProfile::bundled("volta").unwrap();
    let m = measure_only(&profile, "shared-banks");
    let why = m.sections["shared-banks"].as_ref().unwrap_err();
    assert!(why.contains("[benchmarks.shared-banks]"), "{why}");
    let topo = pchase_runner::measure::report::to_topology(&profile.device, &m, "test");
    assert!(topo.sections.is_empty());
    assert!(topo
        .notes
        .iter()
        .any(|n| n.message.starts_with("shared-banks: ") && n.message.contains("no model")));
    // A malformed truth is a profile error, named.
    let mut broken = profile.clone();
    broken.benchmarks.insert(
        "shared-banks".into(),
        toml::from_str("period = 128").unwrap(),
    );
    let m = measure_only(&broken, "shared-banks");
    let why = m.sections["shared-banks"].as_ref().unwrap_err();
    assert!(
        why.contains("benchmarks.shared-banks") && why.contains("period"),
        "{why}"
    );
}

#[cfg(feature = "cuda")]
#[test]
fn the_bank_probe_runs_on_a_gpu() {
    use pchase_runner::measure::MeasureOptions;
    let Some(mut gpu) = crate::gpu::gpu_or_skip("the_bank_probe_runs_on_a_gpu") else {
        return;
    };
    // Every thread's chain comes back to its own word, at every stride.
    for stride in [0, 4, 128] {
        let run = gpu.probe(&bank_launch(stride), &EchoModel).unwrap();
        let out = &run.buffers[0];
        let cycles = u64::from(out[0]) | (u64::from(out[1]) << 32);
        assert!(
            cycles >= 64,
            "stride {stride}: {cycles} cycles for 64 loads"
        );
        let offsets: Vec<u32> = (0..32).map(|t| t * stride).collect();
        assert_eq!(out[2..], offsets[..], "stride {stride}");
    }
    // Every NVIDIA GPU since Maxwell has 32 banks of 4 bytes (CUDA C++ Programming Guide,
    // "Shared Memory" of each compute capability).
    let options = MeasureOptions {
        only: Selection::named(&["shared-banks"]).expect("registered"),
        ..MeasureOptions::default()
    };
    let m = Session::new(&mut *gpu, options).run().expect("runs");
    let section = m
        .section("shared-banks")
        .unwrap_or_else(|| panic!("not measured: {:?}", m.sections.get("shared-banks")));
    assert_eq!(
        section.row("banks").unwrap().value,
        RowValue::count(32, topology::Provenance::Derived)
    );
    let cost = section
        .row("cost_per_way")
        .unwrap()
        .value
        .as_number()
        .unwrap();
    assert!(cost > 0.0, "{cost}");
    eprintln!(
        "{}",
        topology::render::table(&{
            let mut t = topology::Topology::new(topology::DeviceInfo::new(
                &gpu.device().name,
                topology::ComputeCapability::new(9, 0),
                gpu.device().sm_count,
            ));
            t.sections.insert("shared-banks".into(), section.clone());
            t
        })
    );
}
