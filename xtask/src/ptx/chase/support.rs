//! The support kernels: the clock calibrations and the parallel chain initialisation.

use pchase_kernels::{Kernel, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// `clock_overhead`: the fine loop without the load, storing the counter instead of an index.
pub fn clock_overhead_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.comment("Thread 0 of block 0 times `samples` clock / shared store / clock sequences, the");
    w.comment("fine kernels' measurement without the load, to calibrate its overhead.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.ins("or.b32 %r_any, %r_tid, %r_block");
    w.ins("setp.ne.u32 %p_idle, %r_any, 0");
    w.bra("@%p_idle ", "exit");
    w.load_param("%r_samples", "samples", ParamType::U32);
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    timing_cursors(&mut w, "%r_samples");
    timed_loop(&mut w, "%r_samples", &[], None, "%r_k");
    w.blank();
    w.comment("Copy the samples out (out is u32[samples]).");
    w.load_param("%rd_out", "out", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out, %rd_out");
    w.ins("mov.u32 %r_slat, %r_dyn");
    w.ins("mov.u32 %r_k, 0");
    w.ins("setp.eq.u32 %p_loop, %r_samples, 0");
    w.bra("@%p_loop ", "exit");
    w.label("copy_out");
    w.ins("ld.shared.u32 %r_value, [%r_slat]");
    w.ins("st.global.u32 [%rd_out], %r_value");
    w.ins("add.u32 %r_slat, %r_slat, 4");
    w.ins("add.s64 %rd_out, %rd_out, 4");
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_samples");
    w.bra("@%p_loop ", "copy_out");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `sm_clock`: `%globaltimer` and `%clock64` at both ends of a `%clock64` spin.
pub fn sm_clock_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.comment("Thread 0 of block 0 reads the global nanosecond timer and the SM cycle counter,");
    w.comment("spins `spin_cycles` cycles, and reads both again (in mirrored order).");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.ins("or.b32 %r_any, %r_tid, %r_block");
    w.ins("setp.ne.u32 %p_idle, %r_any, 0");
    w.bra("@%p_idle ", "exit");
    w.load_param("%rd_spin", "spin_cycles", ParamType::U64);
    w.load_param("%rd_out", "out", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out, %rd_out");
    w.ins("mov.u64 %rd_g0, %globaltimer");
    w.ins("mov.u64 %rd_c0, %clock64");
    w.label("spin");
    w.ins("mov.u64 %rd_now, %clock64");
    w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_c0");
    w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_spin");
    w.bra("@%p_loop ", "spin");
    w.ins("mov.u64 %rd_c1, %clock64");
    w.ins("mov.u64 %rd_g1, %globaltimer");
    w.ins("st.global.u64 [%rd_out], %rd_g0");
    w.ins("st.global.u64 [%rd_out+8], %rd_c0");
    w.ins("st.global.u64 [%rd_out+16], %rd_g1");
    w.ins("st.global.u64 [%rd_out+24], %rd_c1");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `init_chain`: `chain[y * block_stride + k * stride] = ((k + 1) % nodes[y]) * stride`,
/// and zeros in the `node_words − 1` words after it (the L2 sector probe writes whole or
/// partial sectors this way).
pub fn init_chain_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.comment("Array y = ctaid.y; node k runs over a grid-stride loop in x. Counters are 64-bit");
    w.comment("so k + grid size cannot wrap around for arrays near 2^32 nodes.");
    w.load_param("%rd_chain", "chain", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_chain, %rd_chain");
    w.load_param("%rd_block_stride", "block_stride", ParamType::U64);
    w.load_param("%rd_nodes_ptr", "nodes", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_nodes_ptr, %rd_nodes_ptr");
    w.load_param("%r_stride", "stride", ParamType::U32);
    w.load_param("%r_node_words", "node_words", ParamType::U32);
    w.ins("mov.u32 %r_y, %ctaid.y");
    w.ins("mul.wide.u32 %rd_nodes_off, %r_y, 4");
    w.ins("add.s64 %rd_nodes_addr, %rd_nodes_ptr, %rd_nodes_off");
    w.ins("ld.global.u32 %r_nodes, [%rd_nodes_addr]");
    w.ins("cvt.u64.u32 %rd_nodes, %r_nodes");
    w.ins("cvt.u64.u32 %rd_y, %r_y");
    w.ins("mul.lo.u64 %rd_first, %rd_y, %rd_block_stride");
    w.ins("shl.b64 %rd_first_bytes, %rd_first, 2");
    w.ins("add.s64 %rd_base, %rd_chain, %rd_first_bytes");
    w.ins("cvt.u64.u32 %rd_stride, %r_stride");
    w.ins("mov.u32 %r_ctaid, %ctaid.x");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_nctaid, %nctaid.x");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mul.wide.u32 %rd_k, %r_ctaid, %r_ntid");
    w.ins("cvt.u64.u32 %rd_tid, %r_tid");
    w.ins("add.s64 %rd_k, %rd_k, %rd_tid");
    w.ins("mul.wide.u32 %rd_grid_threads, %r_nctaid, %r_ntid");
    w.ins("setp.ge.u64 %p_loop, %rd_k, %rd_nodes");
    w.bra("@%p_loop ", "exit");
    w.label("node");
    w.ins("add.s64 %rd_next, %rd_k, 1");
    w.ins("setp.eq.u64 %p_wrap, %rd_next, %rd_nodes");
    w.ins("selp.b64 %rd_next, 0, %rd_next, %p_wrap");
    w.ins("cvt.u32.u64 %r_next, %rd_next");
    w.ins("mul.lo.u32 %r_value, %r_next, %r_stride");
    w.ins("mul.lo.u64 %rd_elem, %rd_k, %rd_stride");
    w.ins("shl.b64 %rd_elem_bytes, %rd_elem, 2");
    w.ins("add.s64 %rd_addr, %rd_base, %rd_elem_bytes");
    w.ins("st.global.u32 [%rd_addr], %r_value");
    w.comment("Zeros in words 1 .. node_words - 1 of the node.");
    w.ins("mov.u32 %r_zero, 0");
    w.ins("mov.u32 %r_word, 1");
    w.ins("setp.ge.u32 %p_pad, %r_word, %r_node_words");
    w.bra("@%p_pad ", "padded");
    w.label("pad");
    w.ins("mul.wide.u32 %rd_word_bytes, %r_word, 4");
    w.ins("add.s64 %rd_word_addr, %rd_addr, %rd_word_bytes");
    w.ins("st.global.u32 [%rd_word_addr], %r_zero");
    w.ins("add.u32 %r_word, %r_word, 1");
    w.ins("setp.lt.u32 %p_pad, %r_word, %r_node_words");
    w.bra("@%p_pad ", "pad");
    w.label("padded");
    w.ins("add.s64 %rd_k, %rd_k, %rd_grid_threads");
    w.ins("setp.lt.u64 %p_loop, %rd_k, %rd_nodes");
    w.bra("@%p_loop ", "node");
    w.label("exit");
    w.ins("ret");
    w.finish()
}
