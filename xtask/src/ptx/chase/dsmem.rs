//! The distributed-shared-memory chase of module `hopper`.

use pchase_kernels::{Kernel, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// The remote chain is read through a generic address (`mapa.u64`), as CUDA C++ does for
/// `cluster.map_shared_rank`: with a 32-bit `.shared::cluster` address ptxas converts it to a
/// generic one at every access (`S2R SR_SWINHI` inside the timed window on sm_90); with a
/// generic base that conversion happens once, before the loop, and the timed window holds
/// only the load (`LD.E`), its dependent store and the clock reads.
fn dsmem_access() -> Access {
    Access {
        address: vec![
            "mul.wide.u32 %rd_off, %r_j, 4".to_owned(),
            "add.s64 %rd_addr, %rd_remote, %rd_off".to_owned(),
        ],
        load: "ld.u32 %r_j, [%rd_addr]".to_owned(),
    }
}

/// Maps the shared chain at `%r_schain` to cluster rank `rank` (a register or an immediate)
/// and chases it there from index 0: warm-up, the fine timed window, the copy-out to row
/// `%r_row`.
pub(super) fn remote_fine_chase(w: &mut EntryWriter, rank: &str, comment: &str) {
    w.comment(comment);
    w.ins("cvt.u64.u32 %rd_schain, %r_schain");
    w.ins("cvta.shared.u64 %rd_schain_generic, %rd_schain");
    w.ins(&format!("mapa.u64 %rd_remote, %rd_schain_generic, {rank}"));
    w.ins("mov.u32 %r_j, 0");
    w.blank();
    warmup_loop(w, &dsmem_access());
    w.blank();
    timing_cursors(w, "%r_steps");
    fine_timed_loop(w, &dsmem_access());
    w.blank();
    copy_timings_out(w, "%r_steps", true);
}

/// `chase_fine_dsmem`: block rank 1 of each two-block cluster fills its shared memory with
/// the chain, block rank 0 chases it remotely through a `mapa` address.
pub fn dsmem_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let dims = kernel.cluster_dims().ok_or_else(|| {
        format!(
            "kernel `{}` has no cluster shape in the catalogue",
            kernel.entry()
        )
    })?;
    if dims != [2, 1, 1] {
        return Err(format!(
            "kernel `{}`: the template is written for clusters of 2x1x1 blocks, the catalogue says {dims:?}",
            kernel.entry()
        ));
    }
    // Both directives, as nvcc writes them for __cluster_dims__: a plain cuLaunchKernel then
    // launches clusters of two blocks.
    w.directive(".explicitcluster");
    w.directive(&format!(
        ".reqnctapercluster {}, {}, {}",
        dims[0], dims[1], dims[2]
    ));

    w.comment("Cluster c (blocks 2c and 2c+1) chases the chain at element c * block_stride.");
    w.comment("Rank 1 copies it into its own shared memory; thread 0 of rank 0 chases it there.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_rank, %cluster_ctarank");
    w.ins("mov.u32 %r_row, %clusterid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    w.load_param("%r_shared_nodes", "shared_nodes_elems", ParamType::U32);
    first_element(&mut w);
    global_chain_base(&mut w);
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.comment(
        "Layout as chase_fine_shared: [latency; steps][index; steps][chain; shared_nodes_elems].",
    );
    w.ins("shl.b32 %r_timing_bytes, %r_steps, 3");
    w.ins("add.u32 %r_schain, %r_dyn, %r_timing_bytes");
    w.ins("setp.ne.u32 %p_filler, %r_rank, 0");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@!%p_filler ", "filled");
    copy_chain_to_shared(&mut w);
    w.label("filled");
    w.comment("Release the filled chain to the cluster; acquire it in rank 0.");
    w.ins("barrier.cluster.arrive");
    w.ins("barrier.cluster.wait");
    w.bra("@%p_idle ", "release");
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_block, 8");
    w.ins("add.s64 %rd_block_out, %rd_out_block, %rd_block_off");
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.bra("@!%p_filler ", "chase");
    w.comment("Rank 1 does not chase: its index word is u32::MAX.");
    w.ins("mov.u32 %r_no_index, 0xFFFFFFFF");
    w.ins("st.global.u32 [%rd_block_out+4], %r_no_index");
    w.bra("", "release");
    w.label("chase");
    remote_fine_chase(
        &mut w,
        "1",
        "Generic address of the chain in the shared memory of rank 1.",
    );
    w.ins("st.global.u32 [%rd_block_out+4], %r_j");
    w.label("release");
    w.comment("Every thread of both blocks arrives again, so rank 1 (and its shared memory)");
    w.comment("stays resident until rank 0 has finished reading it.");
    w.ins("barrier.cluster.arrive");
    w.ins("barrier.cluster.wait");
    w.ins("ret");
    w.finish()
}
