//! Templates of the copy kernels (`pchase_kernels::copy`): global to shared memory
//! in rounds, by the threads (`cp.async`, plain loads and stores) or by one thread issuing
//! bulk copies to the tensor memory accelerator (`cp.async.bulk`, its tensor-map form).
//!
//! Registers: `%r_r` the round, `%r_q` the region of the slot being filled, `%r_dst` its
//! slot, `%r_t0`/`%r_t1` the round's `%clock` readings, `%rd_c0`/`%rd_c1` the timed
//! rounds' `%clock64` readings.

use pchase_kernels::copy::{CopyPath, COPY_SHARED_HEADER, COPY_SLOT_ALIGN};
use pchase_kernels::{Kernel, ParamType};

use super::writer::EntryWriter;
use super::DYNAMIC_SHARED;

/// The PTX of the copy kernel of `path`.
pub fn entry(kernel: &'static Kernel, path: CopyPath) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    prologue(&mut w, path);
    w.comment("Round r copies regions q .. q + depth - 1 (mod regions), q = ((r x grid + block) x depth) mod regions.");
    w.ins("mov.u32 %r_r, 0");
    w.label("round");
    w.ins("mad.lo.u32 %r_q, %r_r, %r_grid, %r_block");
    w.ins("mul.lo.u32 %r_q, %r_q, %r_depth");
    w.ins("rem.u32 %r_q, %r_q, %r_regions");
    if path == CopyPath::BulkTensor2d {
        w.comment(
            "Tile q sits at x = (q mod tiles_per_row) x box_w, y = (q / tiles_per_row) x box_h.",
        );
        w.ins("rem.u32 %r_x, %r_q, %r_tiles_per_row");
        w.ins("mul.lo.u32 %r_x, %r_x, %r_box_w");
        w.ins("div.u32 %r_y, %r_q, %r_tiles_per_row");
        w.ins("mul.lo.u32 %r_y, %r_y, %r_box_h");
    }
    w.ins("mov.u32 %r_dst, %r_slots");
    if path.is_bulk() {
        bulk_round(&mut w, path);
    } else {
        thread_round(&mut w, path)?;
    }
    w.ins("mov.u32 %r_t1, %clock");
    record_round(&mut w);
    w.ins("add.u32 %r_r, %r_r, 1");
    w.ins("setp.lt.u32 %p_loop, %r_r, %r_total");
    w.bra("@%p_loop ", "round");
    w.ins("mov.u64 %rd_c1, %clock64");
    epilogue(&mut w);
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// Thread and block registers, parameters, the slots, and (bulk) the mbarrier; the idle
/// threads of a bulk kernel leave.
fn prologue(w: &mut EntryWriter, path: CopyPath) {
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.ins("mov.u32 %r_grid, %nctaid.x");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins(&format!("add.u32 %r_slots, %r_dyn, {COPY_SHARED_HEADER}"));
    w.load_param("%r_bytes", "bytes", ParamType::U32);
    w.load_param("%r_depth", "depth", ParamType::U32);
    w.load_param("%r_warmup", "warmup_rounds", ParamType::U32);
    w.load_param("%r_rounds", "rounds", ParamType::U32);
    w.ins("add.u32 %r_total, %r_warmup, %r_rounds");
    w.comment(&format!(
        "Slots are the copy size rounded up to {COPY_SLOT_ALIGN} bytes."
    ));
    w.ins(&format!(
        "add.u32 %r_slot_bytes, %r_bytes, {}",
        COPY_SLOT_ALIGN - 1
    ));
    w.ins(&format!(
        "and.b32 %r_slot_bytes, %r_slot_bytes, {}",
        (!(COPY_SLOT_ALIGN - 1)) as i32
    ));
    if path == CopyPath::BulkTensor2d {
        w.comment("The tensor map is a kernel parameter; the copy takes its generic address.");
        w.ins("mov.u64 %rd_tmap_param, param_tmap");
        w.ins("cvta.param.u64 %rd_tmap, %rd_tmap_param");
        w.load_param("%r_tiles_per_row", "tiles_per_row", ParamType::U32);
        w.load_param("%r_tile_rows", "tile_rows", ParamType::U32);
        w.load_param("%r_box_w", "box_w", ParamType::U32);
        w.load_param("%r_box_h", "box_h", ParamType::U32);
        w.ins("mul.lo.u32 %r_regions, %r_tiles_per_row, %r_tile_rows");
        w.ins("mul.lo.u32 %r_row_elems, %r_tiles_per_row, %r_box_w");
    } else {
        w.load_param("%rd_src", "src", ParamType::U64);
        w.ins("cvta.to.global.u64 %rd_src, %rd_src");
        w.load_param("%r_regions", "regions", ParamType::U32);
    }
    if path.is_bulk() {
        w.comment("One thread issues every copy; the others have nothing to do.");
        w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
        w.bra("@%p_idle ", "exit");
        w.comment("One arrival (thread 0's expect_tx) per phase; the copies complete the bytes.");
        w.ins("mbarrier.init.shared::cta.b64 [%r_dyn], 1");
        w.comment("Make the initialised mbarrier visible to the async proxy that completes it.");
        w.ins("fence.proxy.async.shared::cta");
        w.ins("mov.u32 %r_phase, 0");
    }
}

/// Thread 0 announces `depth x bytes` on the mbarrier, issues `depth` bulk copies, and waits
/// for the phase to complete; `%r_t0` is read right before the announcement.
fn bulk_round(w: &mut EntryWriter, path: CopyPath) {
    w.ins("mul.lo.u32 %r_tx, %r_depth, %r_bytes");
    start_clocks(w);
    w.ins("mbarrier.arrive.expect_tx.shared::cta.b64 %rd_state, [%r_dyn], %r_tx");
    w.ins("mov.u32 %r_k, 0");
    w.label("issue");
    match path {
        CopyPath::BulkTensor2d => {
            w.ins("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r_dst], [%rd_tmap, {%r_x, %r_y}], [%r_dyn]");
        }
        _ => {
            w.ins("mul.wide.u32 %rd_src_off, %r_q, %r_bytes");
            w.ins("add.s64 %rd_from, %rd_src, %rd_src_off");
            w.ins("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r_dst], [%rd_from], %r_bytes, [%r_dyn]");
        }
    }
    next_slot(w, path);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_more, %r_k, %r_depth");
    w.bra("@%p_more ", "issue");
    w.label("wait");
    w.ins("mbarrier.try_wait.parity.shared::cta.b64 %p_done, [%r_dyn], %r_phase");
    w.bra("@!%p_done ", "wait");
    w.ins("xor.b32 %r_phase, %r_phase, 1");
}

/// Every thread copies its share of each slot (`width` bytes per instruction, strided by
/// the block), then waits for its copies (`cp.async`) and for the block (`bar.sync`).
fn thread_round(w: &mut EntryWriter, path: CopyPath) -> Result<(), String> {
    let width = path
        .thread_width()
        .ok_or_else(|| format!("{path} is not a thread copy"))?;
    w.ins(&format!("mul.lo.u32 %r_first_off, %r_tid, {width}"));
    w.ins(&format!("mul.lo.u32 %r_stride, %r_ntid, {width}"));
    w.comment("Every thread has finished the previous round (and its reads of the slots).");
    w.ins("bar.sync 0");
    start_clocks(w);
    w.ins("mov.u32 %r_k, 0");
    w.label("slot");
    w.ins("mul.wide.u32 %rd_src_off, %r_q, %r_bytes");
    w.ins("add.s64 %rd_region, %rd_src, %rd_src_off");
    w.ins("mov.u32 %r_off, %r_first_off");
    w.ins("setp.ge.u32 %p_inner, %r_off, %r_bytes");
    w.bra("@%p_inner ", "slot_done");
    w.label("element");
    w.ins("cvt.u64.u32 %rd_off, %r_off");
    w.ins("add.s64 %rd_from, %rd_region, %rd_off");
    w.ins("add.u32 %r_to, %r_dst, %r_off");
    match path {
        CopyPath::Plain16 => {
            w.ins("ld.global.cg.v4.u32 {%r_a, %r_b, %r_c, %r_d}, [%rd_from]");
            w.ins("st.shared.v4.u32 [%r_to], {%r_a, %r_b, %r_c, %r_d}");
        }
        CopyPath::AsyncCg16 => w.ins("cp.async.cg.shared.global [%r_to], [%rd_from], 16"),
        _ => w.ins(&format!(
            "cp.async.ca.shared.global [%r_to], [%rd_from], {width}"
        )),
    }
    w.ins("add.u32 %r_off, %r_off, %r_stride");
    w.ins("setp.lt.u32 %p_inner, %r_off, %r_bytes");
    w.bra("@%p_inner ", "element");
    w.label("slot_done");
    next_slot(w, path);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_more, %r_k, %r_depth");
    w.bra("@%p_more ", "slot");
    if path != CopyPath::Plain16 {
        w.comment("The thread's copies form one group; wait until it has landed.");
        w.ins("cp.async.commit_group");
        w.ins("cp.async.wait_group 0");
    }
    w.comment("Every thread's part has landed: the round is complete.");
    w.ins("bar.sync 0");
    Ok(())
}

/// `%rd_c0` at the first timed round, then `%r_t0`.
fn start_clocks(w: &mut EntryWriter) {
    w.ins("setp.eq.u32 %p_first_timed, %r_r, %r_warmup");
    w.ins("@%p_first_timed mov.u64 %rd_c0, %clock64");
    w.ins("mov.u32 %r_t0, %clock");
}

/// The next slot and region (wrapping at `regions`); the tensor form also steps the tile's
/// coordinates across and down the tensor.
fn next_slot(w: &mut EntryWriter, path: CopyPath) {
    w.ins("add.u32 %r_dst, %r_dst, %r_slot_bytes");
    w.ins("add.u32 %r_q, %r_q, 1");
    w.ins("setp.ge.u32 %p_wrap, %r_q, %r_regions");
    w.ins("@%p_wrap mov.u32 %r_q, 0");
    if path == CopyPath::BulkTensor2d {
        w.ins("add.u32 %r_x, %r_x, %r_box_w");
        w.ins("setp.ge.u32 %p_row, %r_x, %r_row_elems");
        w.ins("@%p_row mov.u32 %r_x, 0");
        w.ins("@%p_row add.u32 %r_y, %r_y, %r_box_h");
        w.ins("@%p_wrap mov.u32 %r_y, 0");
    }
}

/// Thread 0 stores the timed round's cycles (`out_round[block x rounds + r - warmup]`).
fn record_round(w: &mut EntryWriter) {
    w.ins("setp.lt.u32 %p_untimed, %r_r, %r_warmup");
    w.ins("setp.ne.or.u32 %p_untimed, %r_tid, 0, %p_untimed");
    w.bra("@%p_untimed ", "recorded");
    w.ins("sub.u32 %r_lat, %r_t1, %r_t0");
    w.ins("sub.u32 %r_i, %r_r, %r_warmup");
    w.ins("mad.lo.u32 %r_i, %r_block, %r_rounds, %r_i");
    w.load_param("%rd_out_round", "out_round", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_round, %rd_out_round");
    w.ins("mul.wide.u32 %rd_i, %r_i, 4");
    w.ins("add.s64 %rd_at, %rd_out_round, %rd_i");
    w.ins("st.global.u32 [%rd_at], %r_lat");
    w.label("recorded");
}

/// Thread 0 stores the timed rounds' cycles, its SM and the last word of the last slot.
fn epilogue(w: &mut EntryWriter) {
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    w.bra("@%p_idle ", "exit");
    w.ins("sub.u64 %rd_cycles, %rd_c1, %rd_c0");
    w.load_param("%rd_out_cycles", "out_cycles", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_cycles, %rd_out_cycles");
    w.ins("mul.wide.u32 %rd_cycles_off, %r_block, 8");
    w.ins("add.s64 %rd_cycles_at, %rd_out_cycles, %rd_cycles_off");
    w.ins("st.global.u64 [%rd_cycles_at], %rd_cycles");
    w.comment("The last word of the last slot: the host checks it against the source.");
    w.ins("sub.u32 %r_last, %r_depth, 1");
    w.ins("mad.lo.u32 %r_check_at, %r_last, %r_slot_bytes, %r_slots");
    w.ins("add.u32 %r_check_at, %r_check_at, %r_bytes");
    w.ins("sub.u32 %r_check_at, %r_check_at, 4");
    w.ins("ld.shared.u32 %r_check, [%r_check_at]");
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_block, 8");
    w.ins("add.s64 %rd_block_at, %rd_out_block, %rd_block_off");
    w.ins("st.global.u32 [%rd_block_at], %r_smid");
    w.ins("st.global.u32 [%rd_block_at+4], %r_check");
}
