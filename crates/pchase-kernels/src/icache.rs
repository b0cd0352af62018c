//! The instruction-fetch kernel: straight-line code of a chosen size run
//! in a loop, so that the time per instruction shows which instruction cache the code fits.
//!
//! The code is `segments` segments of [`SEGMENT_INSTRUCTIONS`] `fma.rn.f32` each, over
//! [`ACCUMULATORS`] independent accumulators (`acc = acc × a + b`, `a` and `b` kernel
//! parameters). IEEE rounding forbids the assembler to merge or reorder the multiply-adds of
//! one accumulator, the parameters are unknown at compile time, and every accumulator is
//! stored at the end, so none of them can be removed or shortened: each is one `FFMA` in
//! the SASS, 16 bytes from Volta on. The loop enters the code through `brx.idx` at segment
//! `entry` and runs to the end, so one module holds every code size (a multiple of a
//! segment, `(segments − entry) × 512` bytes) and is JIT-compiled once. Thread 0 reads
//! `%clock64` when iteration `warmup` begins and after the last one.
//!
//! Dozens of modules of up to a MiB of PTX each would be unreasonable to embed: the module
//! is generated at run time ([`module_ptx`]); `ptx/icache.ptx` is a small instance
//! ([`SAMPLE_SEGMENTS`]) of the same generator, which `cargo xtask ptxas` assembles for
//! every target (docs/ptx.md). The size the benchmark loads,
//! [`BENCHMARK_SEGMENTS`], also has cubins ([`cubin`]): its 2.8 MB of PTX took the driver
//! seconds to compile, and its cubins compress from 1.1 MB to 10–25 KiB each (the code is one
//! instruction repeated).
//!
//! ```
//! use pchase_kernels::icache;
//! let ptx = icache::module_ptx(6).unwrap();
//! assert_eq!(ptx.matches("\tfma.rn.f32").count(), 6 * icache::SEGMENT_INSTRUCTIONS as usize);
//! assert!(ptx.contains("brx.idx"));
//! assert_eq!(icache::code_bytes(2), 1024);
//! assert!(icache::module_ptx(0).is_err());
//! ```

use std::fmt::Write as _;

use crate::kernel::{param, Kernel, KernelKind, Module, Param, ParamType, SharedLayout};
use crate::{ComputeCapability, Error, PtxIsaVersion};

/// `fma.rn.f32` instructions per segment: the granularity of the code sizes.
pub const SEGMENT_INSTRUCTIONS: u32 = 32;
/// Bytes of one SASS instruction from Volta (compute capability 7.0) on.
pub const SASS_INSTRUCTION_BYTES: u32 = 16;
/// Independent accumulators the multiply-adds rotate over (more than an FMA's latency in
/// cycles, so that one warp issues without waiting on its own results).
pub const ACCUMULATORS: u32 = 8;
/// The most segments a module may have: 4 MiB of code.
pub const MAX_SEGMENTS: u32 = 8192;
/// Segments of the committed instance `ptx/icache.ptx`.
pub const SAMPLE_SEGMENTS: u32 = 4;
/// Segments of the module the instruction-cache benchmark loads: 2048 × 512 B = 1 MiB of
/// multiply-adds, well beyond the 128 KiB of the largest instruction cache published
/// (Volta's L1, Jia et al. 2018). Its cubins are embedded ([`cubin`]), so that no run
/// JIT-compiles the 2.8 MB of PTX (seconds of the driver's time).
pub const BENCHMARK_SEGMENTS: u32 = 2048;
/// Bytes the kernel writes to `out`: thread 0's cycles (u64), then each of the 32 threads'
/// accumulators (f32 each).
pub const OUT_BYTES: u32 = 8 + 32 * 4 * ACCUMULATORS;

/// Module `icache`: generated at run time at the size a benchmark asks for.
pub(crate) static ICACHE: Module = Module {
    name: "icache",
    file_name: "icache.ptx",
    ptx: include_str!("../../../ptx/icache.ptx"),
    // brx.idx and .branchtargets arrived in ISA 6.0; 7.0 keeps CUDA 11.0 drivers able to
    // JIT it. sm_70: the benchmark counts 16-byte instructions, Volta's encoding.
    ptx_isa: PtxIsaVersion::new(7, 0),
    min_capability: ComputeCapability::SM_70,
    min_driver_version: 11000,
    on_demand: true,
    description: "straight-line multiply-adds entered at a chosen segment and run in a loop, for the instruction caches (a small instance; the runner generates the size it needs)",
};

static PARAMS: [Param; 6] = [
    param(
        "out",
        ParamType::U64,
        "global pointer to OUT_BYTES: thread 0's cycles (u64) of the timed iterations, then each thread's accumulators",
    ),
    param(
        "entry",
        ParamType::U32,
        "the segment the loop enters at, below the module's segment count",
    ),
    param(
        "warmup",
        ParamType::U32,
        "untimed iterations before the timed ones",
    ),
    param("iterations", ParamType::U32, "timed iterations"),
    param("a", ParamType::U32, "the multiplier, f32 bits"),
    param("b", ParamType::U32, "the addend and start value, f32 bits"),
];

/// `icache_ffma`.
pub(crate) static ICACHE_FFMA: Kernel = Kernel {
    module: &ICACHE,
    entry: "icache_ffma",
    kind: KernelKind::InstructionFetch,
    params: &PARAMS,
    min_capability: ComputeCapability::SM_70,
    shared_layout: SharedLayout::None,
    cluster_dims: None,
};

/// The instruction-fetch kernel.
///
/// ```
/// use pchase_kernels::{icache, KernelKind};
/// assert_eq!(icache::kernel().kind(), KernelKind::InstructionFetch);
/// assert!(icache::module().loaded_on_demand());
/// ```
pub fn kernel() -> &'static Kernel {
    &ICACHE_FFMA
}

/// The module (its embedded PTX is the small instance).
pub fn module() -> &'static Module {
    &ICACHE
}

/// The embedded cubin of the module of `segments` segments for a device of compute
/// capability `device`: there is one only at [`crate::cubin::ICACHE_SEGMENTS`] segments
/// (the benchmark's size) and for the capabilities of [`crate::cubin::ARCHITECTURES`] from
/// 7.0 on.
///
/// ```
/// use pchase_kernels::{icache, ComputeCapability};
/// let cubin = icache::cubin(icache::BENCHMARK_SEGMENTS, ComputeCapability::SM_90).unwrap();
/// assert_eq!(cubin.module_name(), "icache");
/// assert!(icache::cubin(icache::BENCHMARK_SEGMENTS - 1, ComputeCapability::SM_90).is_none());
/// assert!(icache::cubin(icache::BENCHMARK_SEGMENTS, ComputeCapability::SM_50).is_none());
/// ```
pub fn cubin(segments: u32, device: ComputeCapability) -> Option<&'static crate::cubin::Cubin> {
    if segments == crate::cubin::ICACHE_SEGMENTS {
        ICACHE.cubin(device)
    } else {
        None
    }
}

/// Bytes of SASS the loop runs when `segments` segments are executed (the multiply-adds
/// only; the loop's own few instructions ride on top).
pub fn code_bytes(segments: u32) -> u64 {
    u64::from(segments) * u64::from(SEGMENT_INSTRUCTIONS) * u64::from(SASS_INSTRUCTION_BYTES)
}

fn check_segments(segments: u32) -> Result<(), Error> {
    if (1..=MAX_SEGMENTS).contains(&segments) {
        Ok(())
    } else {
        Err(Error::CodeSize {
            segments,
            max: MAX_SEGMENTS,
        })
    }
}

/// The `.entry` of a module of `segments` segments.
///
/// # Errors
/// [`Error::CodeSize`] for no segment or more than [`MAX_SEGMENTS`].
pub fn entry_ptx(segments: u32) -> Result<String, Error> {
    check_segments(segments)?;
    let mut out = String::with_capacity(40 * (segments * SEGMENT_INSTRUCTIONS) as usize + 4096);
    let params: Vec<String> = PARAMS
        .iter()
        .map(|p| format!("\t.param {} param_{}", p.ty().ptx(), p.name()))
        .collect();
    let _ = writeln!(
        out,
        ".visible .entry {}(\n{}\n)\n{{",
        ICACHE_FFMA.entry,
        params.join(",\n")
    );
    let _ = writeln!(out, "\t.reg .pred %p_start, %p_more, %p_first;");
    let _ = writeln!(
        out,
        "\t.reg .b32 %r_entry, %r_warmup, %r_iterations, %r_total, %r_i, %r_tid, %r_a, %r_b;"
    );
    let _ = writeln!(
        out,
        "\t.reg .b64 %rd_t0, %rd_t1, %rd_cycles, %rd_out, %rd_off, %rd_mine;"
    );
    let _ = writeln!(out, "\t.reg .f32 %f_a, %f_b, %f_acc<{ACCUMULATORS}>;");
    out.push_str("\t// Parameters; a and b arrive as f32 bits.\n");
    for (reg, name) in [
        ("%r_entry", "entry"),
        ("%r_warmup", "warmup"),
        ("%r_iterations", "iterations"),
        ("%r_a", "a"),
        ("%r_b", "b"),
    ] {
        let _ = writeln!(out, "\tld.param.u32 {reg}, [param_{name}];");
    }
    out.push_str("\tmov.b32 %f_a, %r_a;\n\tmov.b32 %f_b, %r_b;\n");
    out.push_str("\tadd.u32 %r_total, %r_iterations, %r_warmup;\n\tmov.u32 %r_i, 0;\n");
    out.push_str("\tmov.u64 %rd_t0, 0;\n");
    for k in 0..ACCUMULATORS {
        let _ = writeln!(out, "\tmov.f32 %f_acc{k}, %f_b;");
    }
    let targets: Vec<String> = (0..segments).map(|s| format!("icache_seg_{s}")).collect();
    let _ = writeln!(
        out,
        "\ticache_targets: .branchtargets {};",
        targets.join(", ")
    );
    out.push_str("\t// Each iteration enters the code at segment `entry` and runs to its end.\n");
    out.push_str("icache_loop:\n");
    out.push_str("\tsetp.eq.u32 %p_start, %r_i, %r_warmup;\n");
    out.push_str("\t@%p_start mov.u64 %rd_t0, %clock64;\n");
    out.push_str("\tbrx.idx %r_entry, icache_targets;\n");
    let mut n = 0;
    for target in &targets {
        let _ = writeln!(out, "{target}:");
        for _ in 0..SEGMENT_INSTRUCTIONS {
            let k = n % ACCUMULATORS;
            n += 1;
            let _ = writeln!(out, "\tfma.rn.f32 %f_acc{k}, %f_acc{k}, %f_a, %f_b;");
        }
    }
    out.push_str("\tadd.u32 %r_i, %r_i, 1;\n");
    out.push_str("\tsetp.lt.u32 %p_more, %r_i, %r_total;\n");
    out.push_str("\t@%p_more bra icache_loop;\n");
    out.push_str("\tmov.u64 %rd_t1, %clock64;\n");
    out.push_str("\tsub.u64 %rd_cycles, %rd_t1, %rd_t0;\n");
    out.push_str(
        "\t// Every thread stores its accumulators (nothing is dead); thread 0 the cycles.\n",
    );
    out.push_str("\tld.param.u64 %rd_out, [param_out];\n");
    out.push_str("\tcvta.to.global.u64 %rd_out, %rd_out;\n");
    out.push_str("\tmov.u32 %r_tid, %tid.x;\n");
    let _ = writeln!(out, "\tmul.wide.u32 %rd_off, %r_tid, {};", 4 * ACCUMULATORS);
    out.push_str("\tadd.s64 %rd_mine, %rd_out, %rd_off;\n");
    for k in 0..ACCUMULATORS {
        let _ = writeln!(out, "\tst.global.f32 [%rd_mine+{}], %f_acc{k};", 8 + 4 * k);
    }
    out.push_str("\tsetp.eq.u32 %p_first, %r_tid, 0;\n");
    out.push_str("\t@%p_first st.global.u64 [%rd_out], %rd_cycles;\n");
    out.push_str("\tret;\n}\n");
    Ok(out)
}

/// A whole module of `segments` segments, ready for `cuModuleLoadData`.
///
/// # Errors
/// As [`entry_ptx`].
pub fn module_ptx(segments: u32) -> Result<String, Error> {
    let entry = entry_ptx(segments)?;
    Ok(format!(
        "// memtopo instruction-fetch kernel, {segments} segments of {SEGMENT_INSTRUCTIONS} fma.rn.f32\n\
         .version {}\n.target {}\n.address_size 64\n\n{entry}",
        ICACHE.ptx_isa,
        ICACHE.min_capability.sm_name()
    ))
}
