//! Templates of the bandwidth kernels (module `bandwidth`): streaming reads, writes and
//! copies of global memory and reads of shared memory, one entry per operation, vector width
//! and unroll (`pchase_kernels::bandwidth`).
//!
//! Register roles: `%r_pos` the thread's position in its region (bytes, 32-bit, wrapped by
//! `& %r_mask` at every access), `%r_du<u>` the distance of the iteration's access `u` from
//! access 0 (`u × ntid × vector`), `%rd_base` / `%rd_dbase` the block's region in the source
//! and destination, `%r_acc` the XOR of every loaded word. The loads of one iteration are all
//! issued before their words are consumed, so each thread keeps `unroll` accesses in flight.

use pchase_kernels::bandwidth::{BandwidthKernel, BandwidthOp, ReadVariant};
use pchase_kernels::{Kernel, ParamType};

use super::writer::EntryWriter;
use super::DYNAMIC_SHARED;

/// The key no XOR of real data is expected to equal: a thread stores its accumulator only
/// then, so the loads are live but the store never happens in practice.
const SINK_KEY: &str = "2147483647";

/// The register list of one vector access `u` (`{%r_v<u>_0, …}` or a single register).
fn vector_registers(u: u32, words: u32) -> String {
    let names: Vec<String> = (0..words).map(|w| format!("%r_v{u}_{w}")).collect();
    if words == 1 {
        names[0].clone()
    } else {
        format!("{{{}}}", names.join(", "))
    }
}

/// The type suffix of a vector access (`.u32`, `.v2.u32`, `.v4.u32`).
fn vector_type(words: u32) -> String {
    if words == 1 {
        ".u32".to_owned()
    } else {
        format!(".v{words}.u32")
    }
}

/// The values a write stores: every word of the vector is the thread's position.
fn store_value(words: u32) -> String {
    if words == 1 {
        "%r_pos".to_owned()
    } else {
        format!("{{{}}}", vec!["%r_pos"; words as usize].join(", "))
    }
}

/// The bandwidth kernel `kernel` of shape `shape`.
pub fn entry(kernel: &'static Kernel, shape: BandwidthKernel) -> Result<String, String> {
    let BandwidthKernel {
        op,
        vector_bytes,
        unroll,
    } = shape;
    if !matches!(vector_bytes, 4 | 8 | 16) || !matches!(unroll, 1 | 2 | 4 | 8) {
        return Err(format!(
            "kernel `{}`: no template for {vector_bytes}-byte accesses unrolled {unroll} times",
            kernel.entry()
        ));
    }
    let words = vector_bytes / 4;
    let mut w = EntryWriter::new(kernel);
    w.comment(&format!(
        "{}: {vector_bytes}-byte accesses, {unroll} per thread and iteration; see the module",
        op.instruction()
    ));
    w.comment("header (pchase_kernels::bandwidth) for the addressing.");
    w.load_param("%r_phase", "block_phase", ParamType::U32);
    w.load_param("%r_step", "step", ParamType::U32);
    w.load_param("%r_mask", "mask", ParamType::U32);
    w.load_param("%r_iters", "iterations", ParamType::U32);
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_ctaid, %ctaid.x");
    w.ins("mul.lo.u32 %r_pos, %r_ctaid, %r_phase");
    w.ins(&format!(
        "mad.lo.u32 %r_pos, %r_tid, {vector_bytes}, %r_pos"
    ));
    w.ins(&format!("mul.lo.u32 %r_lane, %r_ntid, {vector_bytes}"));
    for u in 1..unroll {
        w.ins(&format!("mul.lo.u32 %r_du{u}, %r_lane, {u}"));
    }
    if op == BandwidthOp::SharedRead {
        shared_prologue(&mut w);
    } else {
        w.load_param("%rd_block_stride", "block_stride", ParamType::U64);
        w.ins("cvt.u64.u32 %rd_ctaid, %r_ctaid");
        w.ins("mul.lo.u64 %rd_region, %rd_ctaid, %rd_block_stride");
    }
    match op {
        BandwidthOp::SharedRead => {}
        BandwidthOp::Read(_) => region_base(&mut w, "src", "%rd_base"),
        BandwidthOp::Write => region_base(&mut w, "dst", "%rd_base"),
        BandwidthOp::Copy => {
            region_base(&mut w, "src", "%rd_base");
            region_base(&mut w, "dst", "%rd_dbase");
        }
    }
    w.ins("mov.u32 %r_acc, 0");
    w.ins("mov.u32 %r_k, 0");
    w.ins("setp.eq.u32 %p_done, %r_iters, 0");
    w.ins("@%p_done bra $L_done");
    w.label("iteration");
    for u in 0..unroll {
        if u == 0 {
            w.ins("and.b32 %r_o0, %r_pos, %r_mask");
        } else {
            w.ins(&format!("add.u32 %r_o{u}, %r_pos, %r_du{u}"));
            w.ins(&format!("and.b32 %r_o{u}, %r_o{u}, %r_mask"));
        }
        access(&mut w, op, u, words);
    }
    match op {
        BandwidthOp::Read(_) | BandwidthOp::SharedRead => {
            w.comment("Consume every loaded word, after all of the iteration's loads are issued.");
            for u in 0..unroll {
                for word in 0..words {
                    w.ins(&format!("xor.b32 %r_acc, %r_acc, %r_v{u}_{word}"));
                }
            }
        }
        BandwidthOp::Copy => {
            w.comment("Store what was loaded, after all of the iteration's loads are issued.");
            for u in 0..unroll {
                w.ins(&format!("mad.wide.u32 %rd_d{u}, %r_o{u}, 1, %rd_dbase"));
                w.ins(&format!(
                    "st.global{} [%rd_d{u}], {}",
                    vector_type(words),
                    vector_registers(u, words)
                ));
            }
        }
        BandwidthOp::Write => {}
    }
    w.ins("add.u32 %r_pos, %r_pos, %r_step");
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_iters");
    w.ins("@%p_loop bra $L_iteration");
    w.label("done");
    if matches!(op, BandwidthOp::Read(_) | BandwidthOp::SharedRead) {
        w.comment("The accumulator leaves the kernel only where it equals the key: the loads are");
        w.comment("live, the store (practically) never happens.");
        w.ins(&format!("setp.ne.u32 %p_skip, %r_acc, {SINK_KEY}"));
        w.ins("@%p_skip bra $L_exit");
        w.load_param("%rd_sink", "sink", ParamType::U64);
        w.ins("cvta.to.global.u64 %rd_sink, %rd_sink");
        w.ins("mad.lo.u32 %r_gtid, %r_ctaid, %r_ntid, %r_tid");
        w.ins("mul.wide.u32 %rd_soff, %r_gtid, 4");
        w.ins("add.s64 %rd_saddr, %rd_sink, %rd_soff");
        w.ins("st.global.u32 [%rd_saddr], %r_acc");
    }
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// `<register> = <param> + %rd_region` (the block's region), as a global address.
fn region_base(w: &mut EntryWriter, param: &str, register: &str) {
    w.load_param(register, param, ParamType::U64);
    w.ins(&format!("cvta.to.global.u64 {register}, {register}"));
    w.ins(&format!("add.s64 {register}, {register}, %rd_region"));
}

/// The shared-memory kernels write their buffer once (word i holds i) before reading it, so
/// that what they read is defined.
fn shared_prologue(w: &mut EntryWriter) {
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("add.u32 %r_bytes, %r_mask, 1");
    w.ins("shl.b32 %r_fill, %r_tid, 2");
    w.ins("shl.b32 %r_fill_step, %r_ntid, 2");
    w.ins("setp.ge.u32 %p_filled, %r_fill, %r_bytes");
    w.ins("@%p_filled bra $L_filled");
    w.label("fill");
    w.ins("add.u32 %r_faddr, %r_dyn, %r_fill");
    w.ins("st.shared.u32 [%r_faddr], %r_fill");
    w.ins("add.u32 %r_fill, %r_fill, %r_fill_step");
    w.ins("setp.lt.u32 %p_fill, %r_fill, %r_bytes");
    w.ins("@%p_fill bra $L_fill");
    w.label("filled");
    w.ins("bar.sync 0");
}

/// Access `u` of an iteration at offset `%r_o<u>` of the region.
fn access(w: &mut EntryWriter, op: BandwidthOp, u: u32, words: u32) {
    let ty = vector_type(words);
    let regs = vector_registers(u, words);
    match op {
        BandwidthOp::SharedRead => {
            w.ins(&format!("add.u32 %r_sa{u}, %r_dyn, %r_o{u}"));
            w.ins(&format!("ld.shared{ty} {regs}, [%r_sa{u}]"));
        }
        BandwidthOp::Read(variant) => {
            w.ins(&format!("mad.wide.u32 %rd_a{u}, %r_o{u}, 1, %rd_base"));
            w.ins(&format!(
                "ld.global.{}{ty} {regs}, [%rd_a{u}]",
                variant.name()
            ));
        }
        BandwidthOp::Copy => {
            w.ins(&format!("mad.wide.u32 %rd_a{u}, %r_o{u}, 1, %rd_base"));
            w.ins(&format!(
                "ld.global.{}{ty} {regs}, [%rd_a{u}]",
                ReadVariant::Nc.name()
            ));
        }
        BandwidthOp::Write => {
            w.ins(&format!("mad.wide.u32 %rd_a{u}, %r_o{u}, 1, %rd_base"));
            w.ins(&format!("st.global{ty} [%rd_a{u}], {}", store_value(words)));
        }
    }
}
