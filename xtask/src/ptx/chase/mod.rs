//! Templates of the pointer-chase kernels: the six load paths of module `pchase` at both
//! granularities, and the distributed-shared-memory chase of module `hopper`.
//!
//! Register roles shared by every template:
//! `%r_j` the current chain index (relative to the block's chain), `%r_k` the loop counter,
//! `%r_dyn` the start of dynamic shared memory, `%r_slat`/`%r_sidx` the write cursors of the
//! latency and index arrays, `%r_schain` the shared copy of the chain.
//!
//! The families each have a file: `single` (the chases of module `pchase`), `lines` (the
//! line-indexed chases of the TLB walks and their chain initialisation), `pinned` (the
//! SM-pinned chase and the L2 partition map), `two_phase` (fill with one path, evict or
//! re-read with another), `dsmem` (module `hopper`) and `support` (clock calibration and
//! chain initialisation). This file holds what they share: load addressing, the chain
//! registers, and the untimed, timed and copy loops.

mod cluster;
mod dsmem;
mod lines;
mod pinned;
mod single;
mod support;
mod two_phase;

pub use cluster::{cluster_chase_entry, cluster_stream_entry};
pub use dsmem::dsmem_entry;
pub use lines::{chase_lines_entry, init_chain_lines_entry};
pub use pinned::{partition_map_entry, pinned_entry, pinned_multi_entry};
pub use single::chase_entry;
pub use support::{clock_overhead_entry, init_chain_entry, sm_clock_entry};
pub use two_phase::{two_phase_block_entry, two_phase_entry};

use pchase_kernels::{LoadPath, ParamType};

use super::writer::EntryWriter;

/// How one chase step addresses and loads the next index into the chain's index register.
struct Access {
    /// Instructions computing the address of the element the index names; kept outside the
    /// timed window.
    address: Vec<String>,
    /// The load itself, writing the index register.
    load: String,
}

/// The registers one chain is chased with. The single-chain kernels use [`CHAIN`]; the
/// two-phase kernels chase chain A with [`CHAIN`] too (so their timed loop is the very text of
/// `chase_fine_<path>`'s) and chain B with [`CHAIN_B`].
struct ChainRegisters {
    /// The current index, relative to the block's chain.
    index: &'static str,
    /// The chain parameter: global pointer, texture object, or constant element offset.
    chain: &'static str,
    /// Global / constant-bank address of the block's first element.
    base: &'static str,
    /// Texture path: the block's first element as a texel coordinate.
    first: &'static str,
    /// Byte offset of the current element (64-bit).
    offset: &'static str,
    /// Address of the current element (64-bit).
    address: &'static str,
    /// Texture path: texel coordinate of the current element.
    coord: &'static str,
}

const CHAIN: ChainRegisters = ChainRegisters {
    index: "%r_j",
    chain: "%rd_chain",
    base: "%rd_base",
    first: "%r_first",
    offset: "%rd_off",
    address: "%rd_addr",
    coord: "%r_coord",
};

const CHAIN_B: ChainRegisters = ChainRegisters {
    index: "%r_j_b",
    chain: "%rd_chain_b",
    base: "%rd_base_b",
    first: "%r_first_b",
    offset: "%rd_off_b",
    address: "%rd_addr_b",
    coord: "%r_coord_b",
};

/// 64-bit byte offset: index * 4 without 32-bit overflow for chains above 4 GiB.
fn global_address(chain: &ChainRegisters) -> Vec<String> {
    vec![
        format!("mul.wide.u32 {}, {}, 4", chain.offset, chain.index),
        format!(
            "add.s64 {}, {}, {}",
            chain.address, chain.base, chain.offset
        ),
    ]
}

const SHARED_ADDRESS: &[&str] = &[
    "shl.b32 %r_soff, %r_j, 2",
    "add.u32 %r_saddr, %r_schain, %r_soff",
];

fn access(path: LoadPath) -> Access {
    chain_access(path, &CHAIN)
}

fn chain_access(path: LoadPath, chain: &ChainRegisters) -> Access {
    let ChainRegisters { index, address, .. } = chain;
    let global = |qualifier: &str| Access {
        address: global_address(chain),
        load: format!("ld.{qualifier}.u32 {index}, [{address}]"),
    };
    match path {
        LoadPath::GlobalCa => global("global.ca"),
        LoadPath::GlobalCg => global("global.cg"),
        LoadPath::GlobalNc => global("global.nc"),
        LoadPath::Texture => Access {
            // Texel coordinate = block's first element + index; the texture returns the
            // element in .x (the index register), the other components are unused.
            address: vec![format!("add.u32 {}, {}, {index}", chain.coord, chain.first)],
            load: format!(
                "tex.1d.v4.u32.s32 {{{index}, %r_tex_y, %r_tex_z, %r_tex_w}}, [{}, {{{}}}]",
                chain.chain, chain.coord
            ),
        },
        LoadPath::Constant => global("const"),
        LoadPath::Shared => Access {
            address: SHARED_ADDRESS.iter().map(|s| s.to_string()).collect(),
            load: "ld.shared.u32 %r_j, [%r_saddr]".to_owned(),
        },
    }
}

/// `for k in 0..%r_warmup { j = chain[j] }`, untimed, continuing from the current `%r_j`.
fn warmup_loop(w: &mut EntryWriter, access: &Access) {
    w.comment("Warm-up pass: untimed dependent loads that fill the caches. The timed pass");
    w.comment(
        "continues from the index it ends on, so these loads are live and cannot be dropped.",
    );
    untimed_loop(w, access, "%r_warmup", "warmup");
}

/// `for k in 0..count { index = chain[index] }` with labels `<label>` / `<label>_done`.
fn untimed_loop(w: &mut EntryWriter, access: &Access, count_reg: &str, label: &str) {
    let done = format!("{label}_done");
    w.ins("mov.u32 %r_k, 0");
    w.ins(&format!("setp.eq.u32 %p_loop, {count_reg}, 0"));
    w.bra("@%p_loop ", &done);
    w.label(label);
    for instruction in &access.address {
        w.ins(instruction);
    }
    w.ins(&access.load);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_k, {count_reg}"));
    w.bra("@%p_loop ", label);
    w.label(&done);
}

/// The fine-grained timed pass: per step, address, clock, load, dependent shared store of the
/// loaded index, clock, latency store. Expects `%r_slat`/`%r_sidx` at the arrays' starts.
fn fine_timed_loop(w: &mut EntryWriter, access: &Access) {
    w.comment("Timed pass. The store of the loaded index to shared memory uses the load's");
    w.comment("result, so it waits for the load to complete; the second clock read comes after");
    w.comment("that store and therefore after the load.");
    timed_loop(w, "%r_steps", &access.address, Some(&access.load), "%r_j");
}

/// The timed loop shared by the fine-grained chases and `clock_overhead`, so that the
/// calibration runs exactly the measured sequence without the load: per step, `address`,
/// clock, `load`, a shared store of `stored`, clock, latency store; `count` steps.
fn timed_loop(
    w: &mut EntryWriter,
    count: &str,
    address: &[String],
    load: Option<&str>,
    stored: &str,
) {
    timed_loop_labelled(w, "timed", count, address, load, stored);
}

/// [`timed_loop`] with labels `<label>` / `<label>_done`, for an entry with more than one
/// timed loop.
fn timed_loop_labelled(
    w: &mut EntryWriter,
    label: &str,
    count: &str,
    address: &[String],
    load: Option<&str>,
    stored: &str,
) {
    timed_loop_into(w, label, count, address, load, stored, Stores::Arrays);
}

/// Where a timed loop's two stores go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stores {
    /// The loaded index to `[%r_sidx]`, the latency to `[%r_slat]`, both advancing.
    Arrays,
    /// Both to the one word at `[%r_sidx]`: the loads at the sampled pace, keeping nothing.
    OneWord,
}

fn timed_loop_into(
    w: &mut EntryWriter,
    label: &str,
    count: &str,
    address: &[String],
    load: Option<&str>,
    stored: &str,
    stores: Stores,
) {
    let done = format!("{label}_done");
    w.ins("mov.u32 %r_k, 0");
    w.ins(&format!("setp.eq.u32 %p_loop, {count}, 0"));
    w.bra("@%p_loop ", &done);
    w.label(label);
    // Every step must run the same instruction sequence: unrolled copies get different
    // scheduling (ptxas reads the first clock into a uniform register in unrolled bodies),
    // which would make the overhead calibrated by `clock_overhead` vary per step.
    w.pragma("nounroll");
    for instruction in address {
        w.ins(instruction);
    }
    w.ins("mov.u32 %r_t0, %clock");
    if let Some(load) = load {
        w.ins(load);
    }
    w.ins(&format!("st.shared.u32 [%r_sidx], {stored}"));
    w.ins("mov.u32 %r_t1, %clock");
    // %clock is 32 bits; the unsigned difference is right across one wrap-around.
    w.ins("sub.u32 %r_lat, %r_t1, %r_t0");
    if stores == Stores::Arrays {
        w.ins("st.shared.u32 [%r_slat], %r_lat");
        w.ins("add.u32 %r_sidx, %r_sidx, 4");
        w.ins("add.u32 %r_slat, %r_slat, 4");
    } else {
        w.ins("st.shared.u32 [%r_sidx], %r_lat");
    }
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_k, {count}"));
    w.bra("@%p_loop ", label);
    w.label(&done);
}

/// Sets `%r_slat` and `%r_sidx` to the latency and index arrays at the start of dynamic
/// shared memory (`[latency; count][index; count]`, `count` in `%r_count_reg`).
fn timing_cursors(w: &mut EntryWriter, count_reg: &str) {
    w.ins("mov.u32 %r_slat, %r_dyn");
    w.ins(&format!("shl.b32 %r_index_offset, {count_reg}, 2"));
    w.ins("add.u32 %r_sidx, %r_dyn, %r_index_offset");
}

/// Copies `count` latencies and indices from shared memory to `out_latency`/`out_index` at
/// row `%r_row` (`row * count` elements in).
fn copy_timings_out(w: &mut EntryWriter, count_reg: &str, with_index: bool) {
    w.comment("Copy the recorded timings to global memory (outside the timed pass).");
    w.ins("ld.param.u64 %rd_out_latency, [param_out_latency]");
    w.ins("cvta.to.global.u64 %rd_out_latency, %rd_out_latency");
    w.ins(&format!("mul.wide.u32 %rd_row_elems, %r_row, {count_reg}"));
    w.ins("shl.b64 %rd_row_bytes, %rd_row_elems, 2");
    w.ins("add.s64 %rd_olat, %rd_out_latency, %rd_row_bytes");
    if with_index {
        w.ins("ld.param.u64 %rd_out_index, [param_out_index]");
        w.ins("cvta.to.global.u64 %rd_out_index, %rd_out_index");
        w.ins("add.s64 %rd_oidx, %rd_out_index, %rd_row_bytes");
    }
    timing_cursors(w, count_reg);
    w.ins("mov.u32 %r_k, 0");
    w.ins(&format!("setp.eq.u32 %p_loop, {count_reg}, 0"));
    w.bra("@%p_loop ", "copy_out_done");
    w.label("copy_out");
    w.ins("ld.shared.u32 %r_value, [%r_slat]");
    w.ins("st.global.u32 [%rd_olat], %r_value");
    w.ins("add.u32 %r_slat, %r_slat, 4");
    w.ins("add.s64 %rd_olat, %rd_olat, 4");
    if with_index {
        w.ins("ld.shared.u32 %r_value, [%r_sidx]");
        w.ins("st.global.u32 [%rd_oidx], %r_value");
        w.ins("add.u32 %r_sidx, %r_sidx, 4");
        w.ins("add.s64 %rd_oidx, %rd_oidx, 4");
    }
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_k, {count_reg}"));
    w.bra("@%p_loop ", "copy_out");
    w.label("copy_out_done");
}

/// Copies `%r_shared_nodes` elements from the global chain at `%rd_base` into shared memory at
/// `%r_schain`, every thread of the block taking every `%ntid.x`-th element.
fn copy_chain_to_shared(w: &mut EntryWriter) {
    w.comment("All threads of the block copy the chain into shared memory, strided by blockDim.x.");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_i, %r_tid");
    w.ins("setp.ge.u32 %p_loop, %r_i, %r_shared_nodes");
    w.bra("@%p_loop ", "fill_done");
    w.label("fill");
    w.ins("mul.wide.u32 %rd_fill_off, %r_i, 4");
    w.ins("add.s64 %rd_fill_addr, %rd_base, %rd_fill_off");
    w.ins("ld.global.u32 %r_value, [%rd_fill_addr]");
    w.ins("shl.b32 %r_fill_soff, %r_i, 2");
    w.ins("add.u32 %r_fill_saddr, %r_schain, %r_fill_soff");
    w.ins("st.shared.u32 [%r_fill_saddr], %r_value");
    w.ins("add.u32 %r_i, %r_i, %r_ntid");
    w.ins("setp.lt.u32 %p_loop, %r_i, %r_shared_nodes");
    w.bra("@%p_loop ", "fill");
    w.label("fill_done");
}

/// Loads `chain` and `block_stride` and sets `%rd_base` to the global address of element
/// `row * block_stride` (`%r_row` must hold the row).
fn global_chain_base(w: &mut EntryWriter) {
    w.load_param("%rd_chain", "chain", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_chain, %rd_chain");
    w.ins("shl.b64 %rd_first_bytes, %rd_first, 2");
    w.ins("add.s64 %rd_base, %rd_chain, %rd_first_bytes");
}

/// `[pointer, offset, out]`: loads the global pointer parameter `param` into `pointer`
/// and sets `out` to row `%r_row` of it (`offset` = `%r_row × row_bytes`).
fn row_pointer(
    w: &mut EntryWriter,
    param: &str,
    [pointer, offset, out]: [&str; 3],
    row_bytes: u32,
) {
    w.load_param(pointer, param, ParamType::U64);
    w.ins(&format!("cvta.to.global.u64 {pointer}, {pointer}"));
    w.ins(&format!("mul.wide.u32 {offset}, %r_row, {row_bytes}"));
    w.ins(&format!("add.s64 {out}, {pointer}, {offset}"));
}

/// `%rd_first` = `%r_row * block_stride` (elements), 64-bit.
fn first_element(w: &mut EntryWriter) {
    w.load_param("%rd_block_stride", "block_stride", ParamType::U64);
    w.ins("cvt.u64.u32 %rd_row, %r_row");
    w.ins("mul.lo.u64 %rd_first, %rd_row, %rd_block_stride");
}

/// The coarse timed pass: one `%clock64` interval over `%r_steps` dependent loads, closed
/// after the final index is stored by `store_final` (an instruction storing `%r_j`, so the
/// last load is inside the interval); the interval ends in `%rd_cycles`.
fn coarse_timed_loop(w: &mut EntryWriter, access: &Access, store_final: &str) {
    w.comment("Timed pass as a whole: one %clock64 interval over `steps` dependent loads.");
    w.ins("mov.u32 %r_k, 0");
    w.ins("mov.u64 %rd_c0, %clock64");
    w.ins("setp.eq.u32 %p_loop, %r_steps, 0");
    w.bra("@%p_loop ", "timed_done");
    w.label("timed");
    for instruction in &access.address {
        w.ins(instruction);
    }
    w.ins(&access.load);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_steps");
    w.bra("@%p_loop ", "timed");
    w.label("timed_done");
    w.comment("Storing the final index needs the last load's result: the closing clock read");
    w.comment("comes after it, so the last load is inside the interval.");
    w.ins(store_final);
    w.ins("mov.u64 %rd_c1, %clock64");
    w.ins("sub.u64 %rd_cycles, %rd_c1, %rd_c0");
}
