//! The templates of module `probes` (`pchase_kernels::probes`): one function per probe,
//! found by the probe's entry name in [`TEMPLATES`]. A new probe adds its function and its
//! line of the table here, and its `static` in the catalogue.

use pchase_kernels::{Kernel, ParamType};

use super::writer::EntryWriter;
use super::DYNAMIC_SHARED;

/// A probe's template: the PTX of its entry, from the catalogue's description.
type Template = fn(&'static Kernel) -> Result<String, String>;

/// Every probe's template, by entry name.
const TEMPLATES: &[(&str, Template)] = &[
    ("shared_bank_conflicts", shared_bank_conflicts),
    ("gpc_contention", gpc_contention),
    ("l2_ways", l2_ways),
];

/// The PTX entry of the probe `kernel`.
pub fn entry(kernel: &'static Kernel) -> Result<String, String> {
    let template = TEMPLATES
        .iter()
        .find(|(entry, _)| *entry == kernel.entry())
        .map(|(_, template)| template)
        .ok_or_else(|| {
            format!(
                "probe `{}` has no template in xtask/src/ptx/probes.rs",
                kernel.entry()
            )
        })?;
    template(kernel)
}

/// `shared_bank_conflicts`: thread `t` of one warp stores its own shared address into the
/// word at `t × stride_bytes`, then loads that word `loads` times, each load's address the
/// value of the one before: a dependent chain in which every step is one warp-wide
/// `ld.shared` whose addresses are `stride_bytes` apart, so its time per step is the latency
/// of a load with that stride's bank conflicts. `%clock64` is read around the timed loads;
/// a dependent store of the last loaded value comes before the second read, so the clock
/// waits for it.
fn shared_bank_conflicts(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.ins("mov.u32 %r_tid, %tid.x");
    w.load_param("%r_stride", "stride_bytes", ParamType::U32);
    w.load_param("%r_loads", "loads", ParamType::U32);
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("mul.lo.u32 %r_offset, %r_tid, %r_stride");
    w.ins("add.u32 %r_addr, %r_dyn, %r_offset");
    w.ins("st.shared.u32 [%r_addr], %r_addr");
    w.ins("bar.sync 0");
    w.comment("Eight untimed loads, then the timed ones, eight per iteration.");
    for _ in 0..8 {
        w.ins("ld.shared.u32 %r_addr, [%r_addr]");
    }
    w.ins("mov.u64 %rd_start, %clock64");
    w.label("timed");
    for _ in 0..8 {
        w.ins("ld.shared.u32 %r_addr, [%r_addr]");
    }
    w.ins("sub.u32 %r_loads, %r_loads, 8");
    w.ins("setp.ne.u32 %p_more, %r_loads, 0");
    w.bra("@%p_more ", "timed");
    w.ins("st.shared.u32 [%r_addr], %r_addr");
    w.ins("mov.u64 %rd_end, %clock64");
    w.ins("sub.s64 %rd_cycles, %rd_end, %rd_start");
    w.load_param("%rd_out", "out", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out, %rd_out");
    w.ins("setp.eq.u32 %p_first, %r_tid, 0");
    w.ins("@%p_first st.global.u64 [%rd_out], %rd_cycles");
    w.comment("Every thread's final offset: its own word's, when the chain was followed.");
    w.ins("sub.u32 %r_final, %r_addr, %r_dyn");
    w.ins("mul.wide.u32 %rd_slot, %r_tid, 4");
    w.ins("add.s64 %rd_slot, %rd_out, %rd_slot");
    w.ins("st.global.u32 [%rd_slot+8], %r_final");
    w.ins("ret");
    w.finish()
}

/// `gpc_contention`: thread 0 of the first block on each SM claims the SM (`atom.cas` on its
/// claim word) and reads its role; a later block on a claimed SM, and every idle one, leaves.
/// Thread 0 of an active block counts itself at the barrier and waits (`ld.volatile`) until
/// `active` blocks are there, or 50 ms of `%globaltimer` (then it sets the timeout flag);
/// it shares the start time through shared memory. Then every thread streams 16-byte
/// `ld.global.cg.v4` loads, eight per iteration, each warp 512 contiguous bytes, until
/// `2 warm_ns + window_ns` after the start, and counts the loads of iterations that ended in
/// the window. An XOR of everything loaded is stored only if it equals a value no data here
/// has, so the loads cannot be dropped.
fn gpc_contention(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_sm, %smid");
    w.load_param("%rd_control", "control", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_control, %rd_control");
    w.load_param("%r_sms", "sms", ParamType::U32);
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("setp.eq.u32 %p_first, %r_tid, 0");
    w.comment("Thread 0 claims the SM and reads its role.");
    w.bra("@!%p_first ", "claimed");
    w.ins("mov.u32 %r_take, 0");
    w.ins("add.u32 %r_slot, %r_sms, %r_sm");
    w.ins("mul.wide.u32 %rd_off, %r_slot, 4");
    w.ins("add.s64 %rd_addr, %rd_control, %rd_off");
    w.ins("atom.global.cas.b32 %r_old, [%rd_addr], 0, 1");
    w.ins("setp.eq.u32 %p_new, %r_old, 0");
    w.ins("mul.wide.u32 %rd_off, %r_sm, 4");
    w.ins("add.s64 %rd_addr, %rd_control, %rd_off");
    w.ins("@%p_new ld.global.u32 %r_take, [%rd_addr]");
    w.ins("st.shared.u32 [%r_dyn], %r_take");
    w.label("claimed");
    w.ins("bar.sync 0");
    w.ins("ld.shared.u32 %r_role, [%r_dyn]");
    w.ins("setp.eq.u32 %p_idle, %r_role, 0");
    w.bra("@%p_idle ", "done");
    w.comment("The barrier: thread 0 counts itself and waits for the others (50 ms at most).");
    w.bra("@!%p_first ", "met");
    w.load_param("%r_active", "active", ParamType::U32);
    w.ins("shl.b32 %r_slot, %r_sms, 1");
    w.ins("mul.wide.u32 %rd_off, %r_slot, 4");
    w.ins("add.s64 %rd_arrived, %rd_control, %rd_off");
    w.ins("atom.global.add.u32 %r_old, [%rd_arrived], 1");
    w.ins("mov.u64 %rd_now, %globaltimer");
    w.ins("add.u64 %rd_give_up, %rd_now, 50000000");
    w.label("spin");
    w.ins("ld.volatile.global.u32 %r_there, [%rd_arrived]");
    w.ins("setp.ge.u32 %p_all, %r_there, %r_active");
    w.bra("@%p_all ", "start");
    w.ins("mov.u64 %rd_now, %globaltimer");
    w.ins("setp.lt.u64 %p_wait, %rd_now, %rd_give_up");
    w.bra("@%p_wait ", "spin");
    w.ins("mov.u32 %r_one, 1");
    w.ins("st.global.u32 [%rd_arrived+4], %r_one");
    w.label("start");
    w.ins("mov.u64 %rd_now, %globaltimer");
    w.ins("st.shared.u64 [%r_dyn+8], %rd_now");
    w.label("met");
    w.ins("bar.sync 0");
    w.ins("ld.shared.u64 %rd_start, [%r_dyn+8]");
    w.load_param("%r_warm", "warm_ns", ParamType::U32);
    w.load_param("%r_window", "window_ns", ParamType::U32);
    w.ins("cvt.u64.u32 %rd_warm, %r_warm");
    w.ins("cvt.u64.u32 %rd_window, %r_window");
    w.ins("add.u64 %rd_open, %rd_start, %rd_warm");
    w.ins("add.u64 %rd_close, %rd_open, %rd_window");
    w.ins("add.u64 %rd_end, %rd_close, %rd_warm");
    w.load_param("%rd_data", "data", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_data, %rd_data");
    w.load_param("%r_mask", "data_mask", ParamType::U32);
    w.ins("mov.u32 %r_step, %ntid.x");
    w.comment("Each SM starts elsewhere in the data; each warp reads 512 contiguous bytes.");
    w.ins("mul.lo.u32 %r_idx, %r_sm, 253408");
    w.ins("add.u32 %r_idx, %r_idx, %r_tid");
    w.ins("and.b32 %r_idx, %r_idx, %r_mask");
    w.ins("mov.u32 %r_count, 0");
    w.ins("mov.u32 %r_acc, 0");
    w.label("stream");
    for _ in 0..8 {
        w.ins("mul.wide.u32 %rd_off, %r_idx, 16");
        w.ins("add.s64 %rd_addr, %rd_data, %rd_off");
        w.ins("ld.global.cg.v4.u32 {%r_a, %r_b, %r_c, %r_d}, [%rd_addr]");
        w.ins("xor.b32 %r_acc, %r_acc, %r_a");
        w.ins("xor.b32 %r_acc, %r_acc, %r_d");
        w.ins("add.u32 %r_idx, %r_idx, %r_step");
        w.ins("and.b32 %r_idx, %r_idx, %r_mask");
    }
    w.ins("mov.u64 %rd_now, %globaltimer");
    w.ins("setp.ge.u64 %p_after, %rd_now, %rd_open");
    w.ins("setp.lt.u64 %p_before, %rd_now, %rd_close");
    w.ins("and.pred %p_in, %p_after, %p_before");
    w.ins("@%p_in add.u32 %r_count, %r_count, 8");
    w.ins("setp.lt.u64 %p_more, %rd_now, %rd_end");
    w.bra("@%p_more ", "stream");
    w.ins("setp.eq.u32 %p_never, %r_acc, 2654435769");
    w.ins("@%p_never st.global.u32 [%rd_data], %r_acc");
    w.comment("The window's loads of this thread, added to its SM's count.");
    w.ins("shl.b32 %r_slot, %r_sms, 1");
    w.ins("add.u32 %r_slot, %r_slot, %r_sm");
    w.ins("add.u32 %r_slot, %r_slot, 2");
    w.ins("mul.wide.u32 %rd_off, %r_slot, 4");
    w.ins("add.s64 %rd_addr, %rd_control, %rd_off");
    w.ins("red.global.add.u32 [%rd_addr], %r_count");
    w.label("done");
    w.ins("ret");
    w.finish()
}

/// `l2_ways`: thread 0 of every block reads `%smid`; on SM `sm` it claims the launch
/// (`atom.cas` on `out[0]`, the winner writing its SM to `out[1]`), and every block but the
/// winner leaves after the barrier. Mode 0, `rounds` times: thread 0 loads the target and
/// stores the word in shared memory (the store waits for the load); after a barrier every
/// thread loads the lines `tid`, `tid + ntid`, … of the list, four per iteration (the list's
/// words by `ld.global.cs`, the lines by `ld.global.cg`, XORed into an accumulator stored only
/// if it equals a value no data has, so no load is dead); after a second barrier thread 0
/// reads `%clock64`, reloads the target, stores the word in shared memory and reads the clock
/// again; the reload's address is the target's plus the word loaded before AND `zero` (0 at
/// run time), so that it depends on that load and is never merged with it. Mode 1: thread 0
/// alone, for each listed line, stores the line's number (its list word plus the word timed
/// before AND `zero`) in shared memory, reads `%clock`, loads the line, stores the word and
/// reads `%clock` again: the pattern of the fine chases, one load in each interval. (Read
/// with `%clock64` around the load alone, the first loads of an H200 read 0 cycles but for
/// the list word's miss.)
fn l2_ways(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_sm, %smid");
    w.load_param("%rd_out", "out", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out, %rd_out");
    w.load_param("%r_want", "sm", ParamType::U32);
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("setp.eq.u32 %p_first, %r_tid, 0");
    w.comment("Thread 0 of the first block on SM `sm` claims the launch.");
    w.bra("@!%p_first ", "claimed");
    w.ins("mov.u32 %r_take, 0");
    w.ins("setp.eq.u32 %p_here, %r_sm, %r_want");
    w.bra("@!%p_here ", "publish");
    w.ins("atom.global.cas.b32 %r_old, [%rd_out], 0, 1");
    w.ins("setp.eq.u32 %p_new, %r_old, 0");
    w.ins("selp.u32 %r_take, 1, 0, %p_new");
    w.ins("@%p_new st.global.u32 [%rd_out+4], %r_sm");
    w.label("publish");
    w.ins("st.shared.u32 [%r_dyn], %r_take");
    w.label("claimed");
    w.ins("bar.sync 0");
    w.ins("ld.shared.u32 %r_mine, [%r_dyn]");
    w.ins("setp.eq.u32 %p_idle, %r_mine, 0");
    w.bra("@%p_idle ", "done");
    w.load_param("%rd_data", "data", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_data, %rd_data");
    w.load_param("%rd_lines", "lines", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_lines, %rd_lines");
    w.load_param("%r_count", "count", ParamType::U32);
    w.load_param("%r_line_bytes", "line_bytes", ParamType::U32);
    w.load_param("%r_zero", "zero", ParamType::U32);
    w.load_param("%r_mode", "mode", ParamType::U32);
    w.ins("setp.eq.u32 %p_firsts, %r_mode, 1");
    w.bra("@%p_firsts ", "firsts");
    w.blank();
    w.comment("Mode 0: the target, the lines, the timed reload, `rounds` times.");
    w.load_param("%r_target", "target", ParamType::U32);
    w.load_param("%r_rounds", "rounds", ParamType::U32);
    w.ins("mul.wide.u32 %rd_off, %r_target, %r_line_bytes");
    w.ins("add.s64 %rd_t, %rd_data, %rd_off");
    w.ins("mov.u32 %r_step, %ntid.x");
    w.ins("shl.b32 %r_stride, %r_step, 2");
    w.ins("mov.u32 %r_acc, 0");
    w.ins("mov.u32 %r_tv, 0");
    w.ins("mov.u32 %r_round, 0");
    w.ins("setp.eq.u32 %p_no_rounds, %r_rounds, 0");
    w.bra("@%p_no_rounds ", "done");
    w.label("round");
    w.ins("@%p_first ld.global.cg.u32 %r_tv, [%rd_t]");
    w.ins("@%p_first st.shared.u32 [%r_dyn+4], %r_tv");
    w.ins("bar.sync 0");
    w.ins("mov.u32 %r_i, %r_tid");
    w.label("lines");
    w.ins("setp.ge.u32 %p_end, %r_i, %r_count");
    w.bra("@%p_end ", "loaded");
    for k in 0..4 {
        w.ins(&format!("mad.lo.u32 %r_i{k}, %r_step, {k}, %r_i"));
        w.ins(&format!("setp.lt.u32 %p_k{k}, %r_i{k}, %r_count"));
        w.ins(&format!("mul.wide.u32 %rd_lo{k}, %r_i{k}, 4"));
        w.ins(&format!("add.s64 %rd_la{k}, %rd_lines, %rd_lo{k}"));
        w.ins(&format!("@%p_k{k} ld.global.cs.u32 %r_n{k}, [%rd_la{k}]"));
    }
    for k in 0..4 {
        w.ins(&format!("mul.wide.u32 %rd_do{k}, %r_n{k}, %r_line_bytes"));
        w.ins(&format!("add.s64 %rd_da{k}, %rd_data, %rd_do{k}"));
        w.ins(&format!("@%p_k{k} ld.global.cg.u32 %r_v{k}, [%rd_da{k}]"));
    }
    for k in 0..4 {
        w.ins(&format!("@%p_k{k} xor.b32 %r_acc, %r_acc, %r_v{k}"));
    }
    w.ins("add.u32 %r_i, %r_i, %r_stride");
    w.bra("", "lines");
    w.label("loaded");
    w.ins("bar.sync 0");
    w.bra("@!%p_first ", "timed");
    w.ins("and.b32 %r_dep, %r_tv, %r_zero");
    w.ins("cvt.u64.u32 %rd_dep, %r_dep");
    w.ins("add.s64 %rd_again, %rd_t, %rd_dep");
    w.ins("mov.u64 %rd_start, %clock64");
    w.ins("ld.global.cg.u32 %r_tv, [%rd_again]");
    w.ins("st.shared.u32 [%r_dyn+4], %r_tv");
    w.ins("mov.u64 %rd_end, %clock64");
    w.ins("sub.s64 %rd_cycles, %rd_end, %rd_start");
    w.ins("cvt.u32.u64 %r_cycles, %rd_cycles");
    w.ins("add.u32 %r_slot, %r_round, 2");
    w.ins("mul.wide.u32 %rd_so, %r_slot, 4");
    w.ins("add.s64 %rd_sa, %rd_out, %rd_so");
    w.ins("st.global.u32 [%rd_sa], %r_cycles");
    w.label("timed");
    w.ins("bar.sync 0");
    w.ins("add.u32 %r_round, %r_round, 1");
    w.ins("setp.lt.u32 %p_more, %r_round, %r_rounds");
    w.bra("@%p_more ", "round");
    w.ins("setp.eq.u32 %p_never, %r_acc, 2654435769");
    w.ins("@%p_never st.global.u32 [%rd_data], %r_acc");
    w.bra("", "done");
    w.blank();
    w.comment("Mode 1: thread 0 times the first load of each listed line.");
    w.label("firsts");
    w.bra("@!%p_first ", "done");
    w.ins("mov.u32 %r_i, 0");
    w.ins("mov.u32 %r_v, 0");
    w.label("first");
    w.ins("setp.ge.u32 %p_end, %r_i, %r_count");
    w.bra("@%p_end ", "done");
    w.ins("mul.wide.u32 %rd_lo, %r_i, 4");
    w.ins("add.s64 %rd_la, %rd_lines, %rd_lo");
    w.ins("ld.global.cs.u32 %r_n, [%rd_la]");
    w.comment("The line waits for the word timed before (AND zero: 0 at run time), and its");
    w.comment("number is stored before the first clock read: the list's load stays outside");
    w.comment("the interval, and each interval holds one load, as the fine chases time theirs.");
    w.ins("and.b32 %r_dep, %r_v, %r_zero");
    w.ins("add.u32 %r_n, %r_n, %r_dep");
    w.ins("st.shared.u32 [%r_dyn+8], %r_n");
    w.ins("mul.wide.u32 %rd_do, %r_n, %r_line_bytes");
    w.ins("add.s64 %rd_a, %rd_data, %rd_do");
    w.ins("mov.u32 %r_t0, %clock");
    w.ins("ld.global.cg.u32 %r_v, [%rd_a]");
    w.ins("st.shared.u32 [%r_dyn+4], %r_v");
    w.ins("mov.u32 %r_t1, %clock");
    w.ins("sub.u32 %r_cycles, %r_t1, %r_t0");
    w.ins("add.u32 %r_slot, %r_i, 2");
    w.ins("mul.wide.u32 %rd_so, %r_slot, 4");
    w.ins("add.s64 %rd_sa, %rd_out, %rd_so");
    w.ins("st.global.u32 [%rd_sa], %r_cycles");
    w.ins("add.u32 %r_i, %r_i, 1");
    w.bra("", "first");
    w.label("done");
    w.ins("ret");
    w.finish()
}
