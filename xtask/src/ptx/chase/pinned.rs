//! Chases pinned to SMs: `chase_pinned_<path>` and the L2 partition map.

use pchase_kernels::{Kernel, LoadPath, ParamType};

use super::*;
use crate::ptx::writer::EntryWriter;
use crate::ptx::DYNAMIC_SHARED;

/// `chase_pinned_<path>`: coarse chases on chosen SMs, all starting together, each chased
/// by every warp of the block from its own start node; then warp 0 samples loads one by one.
pub fn pinned_entry(kernel: &'static Kernel, path: LoadPath) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access = access(path);
    let header = pchase_kernels::catalogue::PINNED_SHARED_HEADER;
    w.comment(&format!(
        "Coarse chases through {} pinned to chosen SMs. Thread 0 of every block reads %smid;",
        path.name()
    ));
    w.comment("a block on a wanted SM claims that SM's slot (first come), the others leave.");
    w.comment("Shared header: [0] the claimed row or 0xffffffff, [8] the warps' summed cycles,");
    w.comment("[16 + 4 w] warp w's final index; the sampled loads' timings follow it.");
    claim_slot(&mut w);
    w.ins("and.b32 %r_lane, %r_tid, 31");
    w.ins("shr.u32 %r_warp, %r_tid, 5");
    w.ins("setp.ne.u32 %p_lane, %r_lane, 0");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    first_element(&mut w);
    global_chain_base(&mut w);
    w.comment("Warp w starts at element w * warp_offset_elems of the slot's chain.");
    w.load_param("%rd_warp_offset", "warp_offset_elems", ParamType::U64);
    w.ins("cvt.u64.u32 %rd_warp, %r_warp");
    w.ins("mul.lo.u64 %rd_warp_start, %rd_warp, %rd_warp_offset");
    w.ins("cvt.u32.u64 %r_j, %rd_warp_start");
    w.comment("Only the first thread of each warp chases; the others wait at the barriers.");
    w.bra("@%p_lane ", "warmed");
    w.blank();
    warmup_loop(&mut w, &access);
    w.label("warmed");
    w.ins("bar.sync 0");
    w.bra("@%p_lane ", "passed");
    w.ins("shl.b32 %r_fin_off, %r_warp, 2");
    w.ins("add.u32 %r_fin, %r_dyn, %r_fin_off");
    coarse_timed_loop(&mut w, &access, "st.shared.u32 [%r_fin+16], %r_j");
    w.ins("atom.shared.add.u64 %rd_old_sum, [%r_dyn+8], %rd_cycles");
    w.label("passed");
    w.ins("bar.sync 0");
    w.comment("While warp 0 samples, the other warps go on chasing (untimed), so that every");
    w.comment("sampled load finds its line last loaded one array of loads ago, as in the timed");
    w.comment("pass, and under the same load; each stores its final index, which keeps it live.");
    w.bra("@%p_lane ", "exit");
    w.ins("setp.eq.u32 %p_warp0, %r_warp, 0");
    w.bra("@%p_warp0 ", "sampling");
    w.load_param("%r_keep", "sample_steps", ParamType::U32);
    w.comment("Paced like warp 0's sampled loads (the same clock reads and shared stores, into");
    w.comment("the warp's own header word), so that all warps keep one pace.");
    w.ins("mov.u32 %r_sidx, %r_fin");
    w.ins("add.u32 %r_sidx, %r_sidx, 16");
    timed_loop_into(
        &mut w,
        "keep",
        "%r_keep",
        &access.address,
        Some(&access.load),
        "%r_j",
        Stores::OneWord,
    );
    w.ins("st.shared.u32 [%r_fin+16], %r_j");
    w.bra("", "exit");
    w.label("sampling");
    w.comment("Thread 0 from here: the samples, then the slot's record.");
    w.bra("@%p_idle ", "exit");
    w.ins("ld.shared.u64 %rd_sum, [%r_dyn+8]");
    w.load_param("%r_samples", "sample_steps", ParamType::U32);
    w.ins("setp.eq.u32 %p_loop, %r_samples, 0");
    w.bra("@%p_loop ", "sampled");
    w.ins(&format!("add.u32 %r_dyn, %r_dyn, {header}"));
    timing_cursors(&mut w, "%r_samples");
    w.comment("Sampled loads, timed one by one exactly as in the fine-grained chases.");
    timed_loop_labelled(
        &mut w,
        "sample",
        "%r_samples",
        &access.address,
        Some(&access.load),
        "%r_j",
    );
    copy_timings_out(&mut w, "%r_samples", true);
    w.label("sampled");
    slot_record(&mut w);
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// The slot claim every pinned chase starts with: thread 0 reads `%smid`, claims the slot of
/// its SM (first block there), waits (bounded) until every slot is claimed and publishes the
/// row; a block without a slot leaves. Afterwards `%r_row` is the slot, `%r_dyn` the shared
/// header, `%p_idle` "not thread 0", `%r_together` (thread 0) whether all slots started.
fn claim_slot(w: &mut EntryWriter) {
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "published");
    w.ins("mov.u32 %r_none, 0xffffffff");
    w.ins("st.shared.u32 [%r_dyn], %r_none");
    w.ins("mov.u64 %rd_zero, 0");
    w.ins("st.shared.u64 [%r_dyn+8], %rd_zero");
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%rd_sms", "sms", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_sms, %rd_sms");
    w.load_param("%r_slots", "slots", ParamType::U32);
    w.ins("mov.u32 %r_row, 0");
    w.ins("setp.eq.u32 %p_loop, %r_slots, 0");
    w.bra("@%p_loop ", "published");
    w.label("find");
    w.ins("mul.wide.u32 %rd_sm_off, %r_row, 4");
    w.ins("add.s64 %rd_sm_addr, %rd_sms, %rd_sm_off");
    w.ins("ld.global.u32 %r_wanted, [%rd_sm_addr]");
    w.ins("setp.eq.u32 %p_found, %r_wanted, %r_smid");
    w.bra("@%p_found ", "found");
    w.ins("add.u32 %r_row, %r_row, 1");
    w.ins("setp.lt.u32 %p_loop, %r_row, %r_slots");
    w.bra("@%p_loop ", "find");
    w.bra("", "published");
    w.label("found");
    w.comment("Claim slot `row`: only the first block on this SM gets 0 back.");
    w.load_param("%rd_claims", "claims", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_claims, %rd_claims");
    w.ins("mul.wide.u32 %rd_claim_off, %r_row, 4");
    w.ins("add.s64 %rd_claim, %rd_claims, %rd_claim_off");
    w.ins("atom.global.cas.b32 %r_old, [%rd_claim], 0, 1");
    w.ins("setp.ne.u32 %p_taken, %r_old, 0");
    w.bra("@%p_taken ", "published");
    w.ins("mul.wide.u32 %rd_count_off, %r_slots, 4");
    w.ins("add.s64 %rd_count, %rd_claims, %rd_count_off");
    w.ins("atom.global.add.u32 %r_old, [%rd_count], 1");
    w.comment("Wait (at most wait_cycles) until every slot is claimed, so the chases overlap;");
    w.comment("the count is read with an atomic, which the L2 serves, never a stale L1 copy.");
    w.load_param("%rd_wait", "wait_cycles", ParamType::U64);
    w.ins("mov.u32 %r_together, 0");
    w.ins("mov.u64 %rd_w0, %clock64");
    w.label("wait");
    w.ins("atom.global.add.u32 %r_claimed, [%rd_count], 0");
    w.ins("setp.ge.u32 %p_all, %r_claimed, %r_slots");
    w.bra("@%p_all ", "all_claimed");
    w.ins("mov.u64 %rd_now, %clock64");
    w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_w0");
    w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_wait");
    w.bra("@%p_loop ", "wait");
    w.bra("", "publish");
    w.label("all_claimed");
    w.ins("mov.u32 %r_together, 1");
    w.label("publish");
    w.ins("st.shared.u32 [%r_dyn], %r_row");
    w.label("published");
    w.comment("Every thread learns whether the block has a slot; a block without one leaves.");
    w.ins("bar.sync 0");
    w.ins("ld.shared.u32 %r_row, [%r_dyn]");
    w.ins("setp.eq.u32 %p_none, %r_row, 0xffffffff");
    w.bra("@%p_none ", "exit");
}

/// Thread 0's record of the slot: the summed cycles `%rd_sum`, the final index `%r_j` of
/// warp 0's (first) chase, the SM and whether all slots started together.
fn slot_record(w: &mut EntryWriter) {
    row_pointer(
        w,
        "out_slot",
        ["%rd_out_slot", "%rd_slot_off", "%rd_slot_out"],
        16,
    );
    row_pointer(
        w,
        "out_cycles",
        ["%rd_out_cycles", "%rd_cycles_off", "%rd_cycles_out"],
        8,
    );
    w.ins("st.global.u64 [%rd_cycles_out], %rd_sum");
    w.ins("st.global.u32 [%rd_slot_out+8], %r_j");
    w.ins("mov.u32 %r_ran, 1");
    w.ins("st.global.u32 [%rd_slot_out], %r_ran");
    w.ins("st.global.u32 [%rd_slot_out+4], %r_smid");
    w.ins("st.global.u32 [%rd_slot_out+12], %r_together");
}

/// `l2_partition_map`: every SM claims its array; the reference SM loads them all; then
/// each SM in turn times two passes over its own.
pub fn partition_map_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access = access(LoadPath::GlobalCg);
    let header = pchase_kernels::catalogue::MAP_SHARED_HEADER;
    w.comment(
        "Thread 0 of the first block on each SM below sm_count takes part; the others leave.",
    );
    w.comment("Waits poll with atomics (served by the L2) and sleep between polls, so that the");
    w.comment("waiting SMs barely load the L2 while one SM is timed; each wait is bounded.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "exit");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%r_count", "sm_count", ParamType::U32);
    w.ins("setp.ge.u32 %p_out, %r_smid, %r_count");
    w.bra("@%p_out ", "exit");
    w.load_param("%rd_claims", "claims", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_claims, %rd_claims");
    w.ins("mul.wide.u32 %rd_claim_off, %r_smid, 4");
    w.ins("add.s64 %rd_claim, %rd_claims, %rd_claim_off");
    w.ins("atom.global.cas.b32 %r_old, [%rd_claim], 0, 1");
    w.ins("setp.ne.u32 %p_taken, %r_old, 0");
    w.bra("@%p_taken ", "exit");
    w.ins("mul.wide.u32 %rd_count_off, %r_count, 4");
    w.ins("add.s64 %rd_arrived, %rd_claims, %rd_count_off");
    w.ins("add.s64 %rd_done, %rd_arrived, 4");
    w.ins("add.s64 %rd_turn, %rd_arrived, 8");
    w.load_param("%rd_status_base", "out_status", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_status_base, %rd_status_base");
    w.ins("add.s64 %rd_status, %rd_status_base, %rd_claim_off");
    w.load_param("%rd_wait", "wait_ns", ParamType::U64);
    w.ins("atom.global.add.u32 %r_old, [%rd_arrived], 1");
    w.ins("mov.u64 %rd_t0, %globaltimer");
    let wait = |w: &mut EntryWriter, label: &str, word: &str, test: &str, status: u32| {
        let ready = format!("{label}_ready");
        w.label(label);
        w.ins(&format!("atom.global.add.u32 %r_seen, [{word}], 0"));
        w.ins(test);
        w.bra("@%p_ready ", &ready);
        w.ins("nanosleep.u32 500");
        w.ins("mov.u64 %rd_now, %globaltimer");
        w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_t0");
        w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_wait");
        w.bra("@%p_loop ", label);
        w.ins(&format!("mov.u32 %r_status, {status}"));
        w.ins("st.global.u32 [%rd_status], %r_status");
        w.bra("", "exit");
        w.label(&ready);
    };
    w.comment("1. Wait until every SM has arrived.");
    wait(
        &mut w,
        "arrive",
        "%rd_arrived",
        "setp.ge.u32 %p_ready, %r_seen, %r_count",
        2,
    );
    w.load_param("%rd_chain", "chain", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_chain, %rd_chain");
    w.load_param("%rd_block_stride", "block_stride", ParamType::U64);
    w.ins("shl.b64 %rd_array_bytes, %rd_block_stride, 2");
    w.load_param("%r_lines", "lines", ParamType::U32);
    w.load_param("%r_reference", "reference", ParamType::U32);
    w.ins("setp.ne.u32 %p_other, %r_smid, %r_reference");
    w.bra("@%p_other ", "await_reference");
    w.comment("2. The reference loads every SM's array twice, SM order.");
    w.ins("shl.b32 %r_warmup, %r_lines, 1");
    w.ins("mov.u32 %r_array, 0");
    w.ins("mov.u64 %rd_base, %rd_chain");
    w.label("arrays");
    w.ins("mov.u32 %r_j, 0");
    warmup_loop(&mut w, &access);
    w.ins("st.shared.u32 [%r_dyn], %r_j");
    w.ins("add.s64 %rd_base, %rd_base, %rd_array_bytes");
    w.ins("add.u32 %r_array, %r_array, 1");
    w.ins("setp.lt.u32 %p_loop, %r_array, %r_count");
    w.bra("@%p_loop ", "arrays");
    w.ins("membar.gl");
    w.ins("atom.global.exch.b32 %r_old, [%rd_done], 1");
    w.label("await_reference");
    w.comment("3. Wait for the reference, then for this SM's turn (turns go in SM order).");
    wait(
        &mut w,
        "reference",
        "%rd_done",
        "setp.ne.u32 %p_ready, %r_seen, 0",
        3,
    );
    wait(
        &mut w,
        "turn",
        "%rd_turn",
        "setp.eq.u32 %p_ready, %r_seen, %r_smid",
        4,
    );
    w.comment("4. Two timed passes over this SM's own array, every load timed.");
    w.ins("cvt.u64.u32 %rd_row, %r_smid");
    w.ins("mul.lo.u64 %rd_first, %rd_row, %rd_block_stride");
    w.ins("shl.b64 %rd_first_bytes, %rd_first, 2");
    w.ins("add.s64 %rd_base, %rd_chain, %rd_first_bytes");
    w.ins("shl.b32 %r_steps, %r_lines, 1");
    w.ins(&format!("add.u32 %r_dyn, %r_dyn, {header}"));
    w.ins("mov.u32 %r_row, %r_smid");
    w.ins("mov.u32 %r_j, 0");
    timing_cursors(&mut w, "%r_steps");
    fine_timed_loop(&mut w, &access);
    copy_timings_out(&mut w, "%r_steps", false);
    w.ins("mov.u32 %r_status, 1");
    w.ins("st.global.u32 [%rd_status], %r_status");
    w.comment("5. Pass the turn on.");
    w.ins("membar.gl");
    w.ins("add.u32 %r_next, %r_smid, 1");
    w.ins("atom.global.exch.b32 %r_old, [%rd_turn], %r_next");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `chase_pinned_global_cg_x<chains>`: the pinned `.cg` chase with `chains` independent
/// chases per warp (memory-level parallelism past 32 chains per SM). The first thread of
/// warp `w` chases from elements `(w × chains + k) × warp_offset_elems`, `k < chains`, one
/// load of each per step, so `warps × chains` loads of the slot are in flight; no samples.
pub fn pinned_multi_entry(kernel: &'static Kernel, chains: u32) -> Result<String, String> {
    if !(2..=16).contains(&chains) {
        return Err(format!(
            "{}: {chains} chains per warp, expected 2 to 16",
            kernel.entry()
        ));
    }
    let mut w = EntryWriter::new(kernel);
    w.comment(&format!(
        "Coarse .cg chases pinned to chosen SMs, {chains} independent chases per warp. Thread 0"
    ));
    w.comment("of every block reads %smid; a block on a wanted SM claims that SM's slot.");
    w.comment("Shared header: [0] the claimed row or 0xffffffff, [8] the warps' summed cycles,");
    w.comment("[16 + 4 w] the XOR of warp w's final indices.");
    claim_slot(&mut w);
    w.ins("and.b32 %r_lane, %r_tid, 31");
    w.ins("shr.u32 %r_warp, %r_tid, 5");
    w.ins("setp.ne.u32 %p_lane, %r_lane, 0");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    first_element(&mut w);
    global_chain_base(&mut w);
    w.comment(&format!(
        "Chase k of warp w starts at element (w * {chains} + k) * warp_offset_elems."
    ));
    w.load_param("%rd_warp_offset", "warp_offset_elems", ParamType::U64);
    w.ins("cvt.u64.u32 %rd_warp, %r_warp");
    w.ins(&format!("mul.lo.u64 %rd_chase, %rd_warp, {chains}"));
    for k in 0..chains {
        w.ins(&format!("add.u64 %rd_chase{k}, %rd_chase, {k}"));
        w.ins(&format!(
            "mul.lo.u64 %rd_start{k}, %rd_chase{k}, %rd_warp_offset"
        ));
        w.ins(&format!("cvt.u32.u64 %r_j{k}, %rd_start{k}"));
    }
    w.comment("Only the first thread of each warp chases; the others wait at the barriers.");
    w.bra("@%p_lane ", "warmed");
    multi_loop(&mut w, "%r_warmup", "warmup", chains);
    w.label("warmed");
    w.ins("bar.sync 0");
    w.bra("@%p_lane ", "passed");
    w.ins("shl.b32 %r_fin_off, %r_warp, 2");
    w.ins("add.u32 %r_fin, %r_dyn, %r_fin_off");
    w.comment("Timed pass as a whole: one %clock64 interval over `steps` steps of every chase.");
    w.ins("mov.u64 %rd_c0, %clock64");
    multi_loop(&mut w, "%r_steps", "timed", chains);
    w.comment("The XOR of every final index needs every last load: the closing clock read");
    w.comment("comes after its store, so all of them are inside the interval and live.");
    w.ins("mov.u32 %r_live, %r_j0");
    for k in 1..chains {
        w.ins(&format!("xor.b32 %r_live, %r_live, %r_j{k}"));
    }
    w.ins("st.shared.u32 [%r_fin+16], %r_live");
    w.ins("mov.u64 %rd_c1, %clock64");
    w.ins("sub.u64 %rd_cycles, %rd_c1, %rd_c0");
    w.ins("atom.shared.add.u64 %rd_old_sum, [%r_dyn+8], %rd_cycles");
    w.label("passed");
    w.ins("bar.sync 0");
    w.comment("Thread 0: the slot's record, with warp 0's first chase's final index.");
    w.bra("@%p_idle ", "exit");
    w.ins("ld.shared.u64 %rd_sum, [%r_dyn+8]");
    w.ins("mov.u32 %r_j, %r_j0");
    slot_record(&mut w);
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `count` steps of `chains` independent chases: the addresses of all, then all loads.
fn multi_loop(w: &mut EntryWriter, count_reg: &str, label: &str, chains: u32) {
    let done = format!("{label}_done");
    w.ins("mov.u32 %r_k, 0");
    w.ins(&format!("setp.eq.u32 %p_loop, {count_reg}, 0"));
    w.bra("@%p_loop ", &done);
    w.label(label);
    for k in 0..chains {
        w.ins(&format!("mul.wide.u32 %rd_off{k}, %r_j{k}, 4"));
        w.ins(&format!("add.s64 %rd_addr{k}, %rd_base, %rd_off{k}"));
    }
    for k in 0..chains {
        w.ins(&format!("ld.global.cg.u32 %r_j{k}, [%rd_addr{k}]"));
    }
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_k, {count_reg}"));
    w.bra("@%p_loop ", label);
    w.label(&done);
}
