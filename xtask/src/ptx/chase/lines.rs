//! The line-indexed chases (`chase_fine_lines_<path>`) and their chain initialisation
//! (`init_chain_lines`): indices count 128-byte lines, so one chain spans up to 512 GiB, as
//! the TLB walks over all of device memory need.

use pchase_kernels::{catalogue::LINE_UNIT_BYTES, Kernel, LoadPath, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// log2 of [`LINE_UNIT_BYTES`]: the shift from a line index to a byte offset.
const LINE_SHIFT: u32 = LINE_UNIT_BYTES.trailing_zeros();

/// The access of a line-indexed chase: the index times 128 (64-bit), then the path's load.
fn lines_access(path: LoadPath) -> Result<Access, String> {
    let qualifier = match path {
        LoadPath::GlobalCa => "global.ca",
        LoadPath::GlobalCg => "global.cg",
        other => return Err(format!("no line-indexed chase through {other}")),
    };
    let ChainRegisters {
        index,
        offset,
        address,
        base,
        ..
    } = CHAIN;
    Ok(Access {
        address: vec![
            format!("mul.wide.u32 {offset}, {index}, {LINE_UNIT_BYTES}"),
            format!("add.s64 {address}, {base}, {offset}"),
        ],
        load: format!("ld.{qualifier}.u32 {index}, [{address}]"),
    })
}

/// `chase_fine_lines_<path>`: the fine chase of `chase_fine_<path>` with line indices.
pub fn chase_lines_entry(kernel: &'static Kernel, path: LoadPath) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access = lines_access(path)?;
    w.comment(&format!(
        "Fine-grained chase through {} with 128-byte line indices. Thread 0 of each block",
        path.name()
    ));
    w.comment("chases the block's chain, which starts at line ctaid.x * block_stride.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "exit");
    w.ins("mov.u32 %r_row, %ctaid.x");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    first_element(&mut w);
    w.load_param("%rd_chain", "chain", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_chain, %rd_chain");
    w.ins(&format!("shl.b64 %rd_first_bytes, %rd_first, {LINE_SHIFT}"));
    w.ins("add.s64 %rd_base, %rd_chain, %rd_first_bytes");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
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
    timing_cursors(&mut w, "%r_steps");
    fine_timed_loop(&mut w, &access);
    w.blank();
    copy_timings_out(&mut w, "%r_steps", true);
    w.ins("st.global.u32 [%rd_block_out+4], %r_j");
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `init_chain_lines`: the cycle's position `p` (a grid-stride loop over `p`) is node
/// `(p % R) * group + p / R` with `R = nodes / group` groups, at line `node * stride_lines`,
/// and holds the next position's node times `stride_lines`. `group` 1 is address order;
/// a larger group visits one node of every group in turn (the TLB walks' order test).
pub fn init_chain_lines_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.comment("One chain of line indices; position p runs over a grid-stride loop. Byte offsets");
    w.comment("are 64-bit: a chain spans up to 2^32 lines of 128 bytes.");
    w.load_param("%rd_chain", "chain", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_chain, %rd_chain");
    w.load_param("%r_nodes", "nodes", ParamType::U32);
    w.load_param("%r_stride", "stride_lines", ParamType::U32);
    w.load_param("%r_group", "group", ParamType::U32);
    w.ins("max.u32 %r_group, %r_group, 1");
    w.ins("div.u32 %r_groups, %r_nodes, %r_group");
    w.ins("max.u32 %r_groups, %r_groups, 1");
    w.ins("mov.u32 %r_ctaid, %ctaid.x");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_nctaid, %nctaid.x");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mul.lo.u32 %r_k, %r_ctaid, %r_ntid");
    w.ins("add.u32 %r_k, %r_k, %r_tid");
    w.ins("mul.lo.u32 %r_grid_threads, %r_nctaid, %r_ntid");
    w.ins("setp.ge.u32 %p_loop, %r_k, %r_nodes");
    w.bra("@%p_loop ", "exit");
    w.label("node");
    w.ins("add.u32 %r_next, %r_k, 1");
    w.ins("setp.eq.u32 %p_wrap, %r_next, %r_nodes");
    w.ins("selp.b32 %r_next, 0, %r_next, %p_wrap");
    w.comment("Position to node: (p % R) * group + p / R, for this position and the next.");
    for (pos, node) in [("%r_k", "%r_here"), ("%r_next", "%r_there")] {
        w.ins(&format!("rem.u32 %r_in, {pos}, %r_groups"));
        w.ins(&format!("div.u32 %r_member, {pos}, %r_groups"));
        w.ins(&format!("mad.lo.u32 {node}, %r_in, %r_group, %r_member"));
    }
    w.ins("mul.lo.u32 %r_value, %r_there, %r_stride");
    w.ins("mul.wide.u32 %rd_line, %r_here, %r_stride");
    w.ins(&format!("shl.b64 %rd_line_bytes, %rd_line, {LINE_SHIFT}"));
    w.ins("add.s64 %rd_addr, %rd_chain, %rd_line_bytes");
    w.ins("st.global.u32 [%rd_addr], %r_value");
    w.ins("add.u32 %r_k, %r_k, %r_grid_threads");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_nodes");
    w.bra("@%p_loop ", "node");
    w.label("exit");
    w.ins("ret");
    w.finish()
}
