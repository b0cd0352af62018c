//! The cluster kernels of module `hopper` whose shape comes from the launch:
//! `dsmem_cluster_chase` (latency through any rank's shared memory, and where every block
//! ran) and `dsmem_cluster_stream` (bandwidth of distributed shared memory).

use pchase_kernels::{Kernel, ParamType};

use super::dsmem::remote_fine_chase;
use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// Both kernels refuse a launch without a cluster shape (`.explicitcluster`), and carry no
/// `.reqnctapercluster`: `cuLaunchKernelEx` gives the shape, so one kernel serves every
/// cluster size the device allows.
fn launch_shaped(w: &mut EntryWriter, kernel: &'static Kernel) -> Result<(), String> {
    if let Some(dims) = kernel.cluster_dims() {
        return Err(format!(
            "kernel `{}`: the template takes its cluster shape from the launch, the catalogue fixes {dims:?}",
            kernel.entry()
        ));
    }
    w.directive(".explicitcluster");
    Ok(())
}

/// Thread 0 writes `[%smid, %cluster_ctarank, %clusterid.x]` to the first three words of the
/// block's `out_block` row and leaves `%rd_block_out` at the row.
fn record_placement(w: &mut EntryWriter) {
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_block, 16");
    w.ins("add.s64 %rd_block_out, %rd_out_block, %rd_block_off");
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.ins("st.global.u32 [%rd_block_out+4], %r_rank");
    w.ins("st.global.u32 [%rd_block_out+8], %r_row");
}

fn cluster_registers(w: &mut EntryWriter) {
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_rank, %cluster_ctarank");
    w.ins("mov.u32 %r_nrank, %cluster_nctarank");
    w.ins("mov.u32 %r_row, %clusterid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
}

/// Every thread of every block arrives, so that no block (and its shared memory) leaves
/// while another rank may still read it.
fn cluster_barrier(w: &mut EntryWriter) {
    w.ins("barrier.cluster.arrive");
    w.ins("barrier.cluster.wait");
}

/// `dsmem_cluster_chase`: every block copies the chain into its shared memory; rank 0 of
/// cluster c chases the copy of rank `1 + (c + target_offset) mod (size - 1)` (its own in a
/// cluster of one) through a `mapa` address, fine-grained.
pub fn cluster_chase_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    launch_shaped(&mut w, kernel)?;
    w.comment("Cluster c chases one chain; every rank holds a copy, rank 0 reads one of them.");
    cluster_registers(&mut w);
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    w.load_param("%r_shared_nodes", "shared_nodes_elems", ParamType::U32);
    w.load_param("%r_target_offset", "target_offset", ParamType::U32);
    w.ins("mov.u64 %rd_first, 0");
    global_chain_base(&mut w);
    w.comment(
        "Layout as chase_fine_shared: [latency; steps][index; steps][chain; shared_nodes_elems].",
    );
    w.ins("shl.b32 %r_timing_bytes, %r_steps, 3");
    w.ins("add.u32 %r_schain, %r_dyn, %r_timing_bytes");
    copy_chain_to_shared(&mut w);
    w.comment("Release every rank's copy to the cluster; acquire them in rank 0.");
    cluster_barrier(&mut w);
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "release");
    record_placement(&mut w);
    w.ins("setp.eq.u32 %p_chaser, %r_rank, 0");
    w.bra("@%p_chaser ", "chase");
    w.comment("Ranks other than 0 do not chase: their target word is u32::MAX.");
    w.ins("mov.u32 %r_no_target, 0xFFFFFFFF");
    w.ins("st.global.u32 [%rd_block_out+12], %r_no_target");
    w.bra("", "release");
    w.label("chase");
    w.comment("Target rank: 1 + (c + target_offset) mod (size - 1); 0 in a cluster of one.");
    w.ins("sub.u32 %r_others, %r_nrank, 1");
    w.ins("max.u32 %r_divisor, %r_others, 1");
    w.ins("add.u32 %r_turn, %r_row, %r_target_offset");
    w.ins("rem.u32 %r_turn, %r_turn, %r_divisor");
    w.ins("add.u32 %r_turn, %r_turn, 1");
    w.ins("setp.eq.u32 %p_alone, %r_others, 0");
    w.ins("selp.u32 %r_target, 0, %r_turn, %p_alone");
    w.ins("st.global.u32 [%rd_block_out+12], %r_target");
    remote_fine_chase(
        &mut w,
        "%r_target",
        "Generic address of the chain in the target rank's shared memory.",
    );
    w.label("release");
    cluster_barrier(&mut w);
    w.ins("ret");
    w.finish()
}

/// One pass of the block's threads over a region of `%r_bytes` at `%rd_region`, 16 bytes per
/// thread and step; `body` is the access at `%rd_at`.
fn stream_pass(w: &mut EntryWriter, label: &str, body: &[&str]) {
    let done = format!("{label}_done");
    w.ins("mov.u32 %r_off, %r_tid16");
    w.ins("setp.ge.u32 %p_inner, %r_off, %r_bytes");
    w.bra("@%p_inner ", &done);
    w.label(label);
    w.ins("cvt.u64.u32 %rd_at_off, %r_off");
    w.ins("add.s64 %rd_at, %rd_region, %rd_at_off");
    for line in body {
        w.ins(line);
    }
    w.ins("add.u32 %r_off, %r_off, %r_step16");
    w.ins("setp.lt.u32 %p_inner, %r_off, %r_bytes");
    w.bra("@%p_inner ", label);
    w.label(&done);
}

/// `repeats` passes of [`stream_pass`], labelled `<label>_rep`.
fn stream_repeats(w: &mut EntryWriter, label: &str, body: &[&str]) {
    let rep = format!("{label}_rep");
    let rep_done = format!("{label}_rep_done");
    w.ins("mov.u32 %r_k, 0");
    w.ins("setp.eq.u32 %p_loop, %r_repeats, 0");
    w.bra("@%p_loop ", &rep_done);
    w.label(&rep);
    stream_pass(w, label, body);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_repeats");
    w.bra("@%p_loop ", &rep);
    w.label(&rep_done);
}

/// `dsmem_cluster_stream`: every block fills its region, then all its threads read (or
/// write) 16 bytes at a time over rank `(rank + 1) mod size`'s region (or their own),
/// `repeats` times, timed by thread 0 between two block barriers.
pub fn cluster_stream_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    launch_shaped(&mut w, kernel)?;
    cluster_registers(&mut w);
    w.load_param("%r_bytes", "bytes", ParamType::U32);
    w.load_param("%r_repeats", "repeats", ParamType::U32);
    w.load_param("%r_mode", "mode", ParamType::U32);
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("shl.b32 %r_tid16, %r_tid, 4");
    w.ins("shl.b32 %r_step16, %r_ntid, 4");
    w.comment("Fill the block's own region (each thread its 16-byte slots).");
    w.ins("cvt.u64.u32 %rd_dyn, %r_dyn");
    w.ins("cvta.shared.u64 %rd_own, %rd_dyn");
    w.ins("mov.u64 %rd_region, %rd_own");
    w.ins("add.u32 %r_a, %r_tid, 1");
    w.ins("mov.u32 %r_b, %r_rank");
    w.ins("mov.u32 %r_c, %r_row");
    w.ins("mov.u32 %r_d, %r_bytes");
    stream_pass(
        &mut w,
        "fill",
        &["st.v4.u32 [%rd_at], {%r_a, %r_b, %r_c, %r_d}"],
    );
    cluster_barrier(&mut w);
    w.comment("Target: the next rank's region (mode bit 1: the block's own).");
    w.ins("add.u32 %r_next, %r_rank, 1");
    w.ins("rem.u32 %r_next, %r_next, %r_nrank");
    w.ins("mapa.u64 %rd_remote, %rd_own, %r_next");
    w.ins("and.b32 %r_local, %r_mode, 2");
    w.ins("setp.ne.u32 %p_local, %r_local, 0");
    w.ins("selp.b64 %rd_region, %rd_own, %rd_remote, %p_local");
    w.ins("and.b32 %r_write, %r_mode, 1");
    w.ins("setp.ne.u32 %p_write, %r_write, 0");
    w.ins("bar.sync 0");
    w.ins("mov.u64 %rd_c0, %clock64");
    w.bra("@%p_write ", "writes");
    stream_repeats(
        &mut w,
        "reads",
        &[
            "ld.v4.u32 {%r_x, %r_y, %r_z, %r_w}, [%rd_at]",
            "xor.b32 %r_a, %r_a, %r_x",
            "xor.b32 %r_b, %r_b, %r_y",
            "xor.b32 %r_c, %r_c, %r_z",
            "xor.b32 %r_d, %r_d, %r_w",
        ],
    );
    w.bra("", "passes_done");
    w.label("writes");
    stream_repeats(
        &mut w,
        "stores",
        &["st.v4.u32 [%rd_at], {%r_a, %r_b, %r_c, %r_d}"],
    );
    w.comment("The stores count once they are visible to the cluster.");
    w.ins("fence.acq_rel.cluster");
    w.label("passes_done");
    w.ins("bar.sync 0");
    w.ins("mov.u64 %rd_c1, %clock64");
    w.ins("sub.u64 %rd_cycles, %rd_c1, %rd_c0");
    w.comment("Every thread folds what it read into the block's fourth word (the host zeroes it),");
    w.comment("so no load is dead.");
    w.ins("xor.b32 %r_a, %r_a, %r_b");
    w.ins("xor.b32 %r_c, %r_c, %r_d");
    w.ins("xor.b32 %r_a, %r_a, %r_c");
    w.load_param("%rd_out_sink", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_sink, %rd_out_sink");
    w.ins("mul.wide.u32 %rd_sink_off, %r_block, 16");
    w.ins("add.s64 %rd_sink, %rd_out_sink, %rd_sink_off");
    w.ins("red.global.xor.b32 [%rd_sink+12], %r_a");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "release");
    record_placement(&mut w);
    w.load_param("%rd_out_cycles", "out_cycles", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_cycles, %rd_out_cycles");
    w.ins("mul.wide.u32 %rd_cycles_off, %r_block, 8");
    w.ins("add.s64 %rd_cycles_at, %rd_out_cycles, %rd_cycles_off");
    w.ins("st.global.u64 [%rd_cycles_at], %rd_cycles");
    w.label("release");
    cluster_barrier(&mut w);
    w.ins("ret");
    w.finish()
}
