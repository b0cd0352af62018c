//! The chases of module `pchase`: every load path at both granularities.

use pchase_kernels::{Granularity, Kernel, LoadPath, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// `chase_<path>` / `chase_fine_<path>`.
pub fn chase_entry(
    kernel: &'static Kernel,
    path: LoadPath,
    granularity: Granularity,
) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access = access(path);
    let fine = granularity == Granularity::Fine;
    let uses_shared_chain = path == LoadPath::Shared;

    w.comment(&format!(
        "{} chase through {} ({}). Thread 0 of each block chases the block's chain,",
        if fine { "Fine-grained" } else { "Coarse" },
        path.name(),
        access.load.split(' ').next().unwrap_or_default(),
    ));
    w.comment(
        "which starts at element ctaid.x * block_stride; indices are relative to that start.",
    );
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    if !uses_shared_chain {
        w.bra("@%p_idle ", "exit");
    }
    w.ins("mov.u32 %r_row, %ctaid.x");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    first_element(&mut w);
    match path {
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc | LoadPath::Shared => {
            global_chain_base(&mut w);
        }
        LoadPath::Constant => {
            w.comment("The chain is the module's constant array; the `chain` parameter is unused.");
            let constant = pchase_kernels::catalogue::constant_chain();
            w.ins(&format!("mov.u64 %rd_const, {}", constant.name()));
            w.ins("shl.b64 %rd_first_bytes, %rd_first, 2");
            w.ins("add.s64 %rd_base, %rd_const, %rd_first_bytes");
        }
        LoadPath::Texture => {
            w.comment("`chain` is the texture object; texel coordinates are 32-bit.");
            w.load_param("%rd_chain", "chain", ParamType::U64);
            w.ins("cvt.u32.u64 %r_first, %rd_first");
        }
    }
    if fine || uses_shared_chain {
        w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    }
    if uses_shared_chain {
        w.load_param("%r_shared_nodes", "shared_nodes_elems", ParamType::U32);
        if fine {
            w.comment("The chain copy follows the latency and index arrays (8 * steps bytes).");
            w.ins("shl.b32 %r_timing_bytes, %r_steps, 3");
            w.ins("add.u32 %r_schain, %r_dyn, %r_timing_bytes");
        } else {
            w.ins("mov.u32 %r_schain, %r_dyn");
        }
        copy_chain_to_shared(&mut w);
        w.ins("bar.sync 0");
        w.comment("Only thread 0 chases; the others leave after the barrier.");
        w.bra("@%p_idle ", "exit");
    }
    w.ins("mov.u32 %r_smid, %smid");
    w.ins("mov.u32 %r_j, 0");
    w.blank();
    warmup_loop(&mut w, &access);
    w.blank();
    row_pointer(
        &mut w,
        "out_block",
        ["%rd_out_block", "%rd_block_off", "%rd_block_out"],
        8,
    );
    if fine {
        timing_cursors(&mut w, "%r_steps");
        fine_timed_loop(&mut w, &access);
        w.blank();
        copy_timings_out(&mut w, "%r_steps", true);
        w.ins("st.global.u32 [%rd_block_out+4], %r_j");
    } else {
        coarse_timed_loop(&mut w, &access, "st.global.u32 [%rd_block_out+4], %r_j");
        w.load_param("%rd_out_cycles", "out_cycles", ParamType::U64);
        w.ins("cvta.to.global.u64 %rd_out_cycles, %rd_out_cycles");
        w.ins("add.s64 %rd_cycles_out, %rd_out_cycles, %rd_block_off");
        w.ins("st.global.u64 [%rd_cycles_out], %rd_cycles");
    }
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.label("exit");
    w.ins("ret");
    w.finish()
}
