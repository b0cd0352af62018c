//! The two-phase chases: fill with one load path, then evict or re-read with another.

use pchase_kernels::{Kernel, LoadPath, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// Loads chain `tag`'s parameters (`chain_<tag>`, `block_stride_<tag>`) and prepares the
/// registers `path`'s loads use: the base address of block `%rd_row`'s chain (global and
/// constant paths) or the texture object and the first texel (texture path).
fn two_phase_chain(
    w: &mut EntryWriter,
    path: LoadPath,
    tag: &str,
    chain: &ChainRegisters,
) -> Result<(), String> {
    let first = format!("%rd_first_{tag}");
    let first_bytes = format!("%rd_first_bytes_{tag}");
    let stride = format!("%rd_block_stride_{tag}");
    w.load_param(&stride, &format!("block_stride_{tag}"), ParamType::U64);
    w.ins(&format!("mul.lo.u64 {first}, %rd_row, {stride}"));
    w.load_param(chain.chain, &format!("chain_{tag}"), ParamType::U64);
    match path {
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc => {
            w.ins(&format!("cvta.to.global.u64 {0}, {0}", chain.chain));
            w.ins(&format!("shl.b64 {first_bytes}, {first}, 2"));
            w.ins(&format!(
                "add.s64 {}, {}, {first_bytes}",
                chain.base, chain.chain
            ));
        }
        LoadPath::Constant => {
            w.comment(&format!(
                "chain_{tag} is the element offset of chain {} inside the constant array.",
                tag.to_uppercase()
            ));
            let constant = pchase_kernels::catalogue::constant_chain();
            let element = format!("%rd_const_first_{tag}");
            w.ins(&format!("add.s64 {element}, {}, {first}", chain.chain));
            w.ins(&format!("shl.b64 {first_bytes}, {element}, 2"));
            w.ins(&format!("mov.u64 %rd_const_{tag}, {}", constant.name()));
            w.ins(&format!(
                "add.s64 {}, %rd_const_{tag}, {first_bytes}",
                chain.base
            ));
        }
        LoadPath::Texture => {
            w.comment(&format!(
                "chain_{tag} is a texture object; texel coordinates are 32-bit."
            ));
            w.ins(&format!("cvt.u32.u64 {}, {first}", chain.first));
        }
        LoadPath::Shared => {
            return Err(format!(
                "kernel `{}`: the two-phase template has no {} path",
                w.entry(),
                path.name()
            ))
        }
    }
    Ok(())
}

/// `two_phase_<first>_<second>`: thread `thread_a` warms chain A through `first`, barrier,
/// thread `thread_b` warms chain B through `second`, barrier, thread `thread_a` re-times
/// chain A with the fine timed loop of `chase_fine_<first>`.
pub fn two_phase_entry(
    kernel: &'static Kernel,
    first: LoadPath,
    second: LoadPath,
) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access_a = chain_access(first, &CHAIN);
    let access_b = chain_access(second, &CHAIN_B);

    w.comment(&format!(
        "Two-phase probe: thread_a warms chain A through {}, thread_b then loads chain B",
        first.name()
    ));
    w.comment(&format!(
        "through {}, and thread_a re-times chain A. Block b uses the chains at elements",
        second.name()
    ));
    w.comment("b * block_stride_a / b * block_stride_b; indices are relative to those starts.");
    w.comment("Every thread of the block reaches both barriers: the phase branches jump only to");
    w.comment("labels before the next barrier, and nothing returns before the second one.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_row, %ctaid.x");
    w.load_param("%r_thread_a", "thread_a", ParamType::U32);
    w.load_param("%r_thread_b", "thread_b", ParamType::U32);
    w.ins("setp.ne.u32 %p_not_a, %r_tid, %r_thread_a");
    w.ins("setp.ne.u32 %p_not_b, %r_tid, %r_thread_b");
    w.load_param("%r_warmup_a", "warmup_a", ParamType::U32);
    w.load_param("%r_warmup_b", "warmup_b", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    w.ins("cvt.u64.u32 %rd_row, %r_row");
    two_phase_chain(&mut w, first, "a", &CHAIN)?;
    two_phase_chain(&mut w, second, "b", &CHAIN_B)?;
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_row, 8");
    w.ins("add.s64 %rd_block_out, %rd_out_block, %rd_block_off");
    w.ins(&format!("mov.u32 {}, 0", CHAIN.index));
    w.ins(&format!("mov.u32 {}, 0", CHAIN_B.index));
    w.blank();

    w.comment("Phase 1: thread_a warms chain A from index 0; the others wait at the barrier.");
    w.bra("@%p_not_a ", "phase_a_done");
    untimed_loop(&mut w, &access_a, "%r_warmup_a", "warmup_a");
    w.label("phase_a_done");
    w.ins("bar.sync 0");
    w.blank();

    w.comment("Phase 2: thread_b loads chain B from index 0; the others wait at the barrier.");
    w.bra("@%p_not_b ", "phase_b_done");
    untimed_loop(&mut w, &access_b, "%r_warmup_b", "warmup_b");
    w.comment("Storing B's final index keeps its loads live (ptxas would drop an unused chain);");
    w.comment(".cg keeps the store out of L1, and thread_a overwrites the word after the barrier.");
    w.ins(&format!(
        "st.global.cg.u32 [%rd_block_out+4], {}",
        CHAIN_B.index
    ));
    w.label("phase_b_done");
    w.ins("bar.sync 0");
    w.blank();

    w.comment("Phase 3: thread_a continues chain A where its warm-up ended and times each load.");
    w.bra("@%p_not_a ", "exit");
    retime_chain_a(w, &access_a)
}

/// Phase 3 of both two-phase templates, for the thread that passed the branch to `exit`:
/// times each load of chain A with the fine timed loop, copies the timings out, stores
/// `[%smid, final index]` at `%rd_block_out`, and ends the entry.
fn retime_chain_a(mut w: EntryWriter, access_a: &Access) -> Result<String, String> {
    w.ins("mov.u32 %r_smid, %smid");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    timing_cursors(&mut w, "%r_steps");
    fine_timed_loop(&mut w, access_a);
    w.blank();
    copy_timings_out(&mut w, "%r_steps", true);
    w.ins(&format!("st.global.u32 [%rd_block_out+4], {}", CHAIN.index));
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `for node in (tid..nodes).step_by(ntid) { sink ^= *(u32*)(base + node * stride) }` through
/// `ld.global.cg`: every thread of the block loads every `%ntid.x`-th node, so that the
/// block walks the region in address order, a warp's 32 nodes at a time.
fn block_pass(w: &mut EntryWriter, tag: &str) {
    let label = format!("block_pass_{tag}");
    let done = format!("{label}_done");
    w.ins("mov.u32 %r_i, %r_tid");
    w.ins(&format!("setp.ge.u32 %p_loop, %r_i, %r_nodes_{tag}"));
    w.bra("@%p_loop ", &done);
    w.label(&label);
    w.ins(&format!("mul.wide.u32 %rd_off, %r_i, %r_stride_{tag}"));
    w.ins(&format!("add.s64 %rd_addr, %rd_base_{tag}, %rd_off"));
    w.ins("ld.global.cg.u32 %r_value, [%rd_addr]");
    w.ins("xor.b32 %r_sink, %r_sink, %r_value");
    w.ins("add.u32 %r_i, %r_i, %r_ntid");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_i, %r_nodes_{tag}"));
    w.bra("@%p_loop ", &label);
    w.label(&done);
}

/// `two_phase_block_global_cg`: every thread of the (single) block loads chain A's nodes in
/// address order through `ld.global.cg`, barrier, the same for chain B, barrier, then
/// thread 0 chases chain A from index 0 and times each load with the fine timed loop of
/// `chase_fine_global_cg`. The L2's line probe: A's first nodes are its oldest lines, as
/// after one thread's pass, at a fraction of the time.
pub fn two_phase_block_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access_a = chain_access(LoadPath::GlobalCg, &CHAIN);
    w.comment("Block-filled two-phase probe: all threads load chain A's nodes (node k at byte");
    w.comment("k * stride_a) in address order, then chain B's; thread 0 then re-times chain A.");
    w.comment("Every thread reaches both barriers; the loaded words are folded into %r_sink and");
    w.comment("stored before the second barrier (thread 0 overwrites that word afterwards).");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_row, %ctaid.x");
    w.ins("mov.u32 %r_sink, 0");
    for tag in ["a", "b"] {
        w.load_param(
            &format!("%rd_base_{tag}"),
            &format!("chain_{tag}"),
            ParamType::U64,
        );
        w.ins(&format!(
            "cvta.to.global.u64 %rd_base_{tag}, %rd_base_{tag}"
        ));
        w.load_param(
            &format!("%r_nodes_{tag}"),
            &format!("nodes_{tag}"),
            ParamType::U32,
        );
        w.load_param(
            &format!("%r_stride_{tag}"),
            &format!("stride_{tag}"),
            ParamType::U32,
        );
    }
    w.ins(&format!("mov.u64 {}, %rd_base_a", CHAIN.base));
    w.load_param("%r_steps", "steps", ParamType::U32);
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_row, 8");
    w.ins("add.s64 %rd_block_out, %rd_out_block, %rd_block_off");
    w.blank();

    w.comment("Phase 1: the block loads chain A in address order.");
    block_pass(&mut w, "a");
    w.ins("bar.sync 0");
    w.blank();
    w.comment("Phase 2: the block loads chain B in address order.");
    block_pass(&mut w, "b");
    w.ins("st.global.cg.u32 [%rd_block_out+4], %r_sink");
    w.ins("bar.sync 0");
    w.blank();

    w.comment("Phase 3: thread 0 chases chain A from index 0 and times each load.");
    w.ins("setp.ne.u32 %p_not_a, %r_tid, 0");
    w.bra("@%p_not_a ", "exit");
    w.ins(&format!("mov.u32 {}, 0", CHAIN.index));
    retime_chain_a(w, &access_a)
}
