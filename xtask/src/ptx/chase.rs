//! Templates of the pointer-chase kernels: the six load paths of module `pchase` at both
//! granularities, and the distributed-shared-memory chase of module `hopper`.
//!
//! Register roles shared by every template:
//! `%r_j` the current chain index (relative to the block's chain), `%r_k` the loop counter,
//! `%r_dyn` the start of dynamic shared memory, `%r_slat`/`%r_sidx` the write cursors of the
//! latency and index arrays, `%r_schain` the shared copy of the chain.

use pchase_kernels::{Granularity, Kernel, LoadPath, ParamType};

use super::writer::EntryWriter;
use super::DYNAMIC_SHARED;

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

fn bra(w: &mut EntryWriter, predicate: &str, label: &str) {
    w.ins(&format!(
        "{predicate}bra {}",
        EntryWriter::label_name(label)
    ));
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
    bra(w, "@%p_loop ", &done);
    w.label(label);
    for instruction in &access.address {
        w.ins(instruction);
    }
    w.ins(&access.load);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins(&format!("setp.lt.u32 %p_loop, %r_k, {count_reg}"));
    bra(w, "@%p_loop ", label);
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
    bra(w, "@%p_loop ", &done);
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
    bra(w, "@%p_loop ", label);
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
    bra(w, "@%p_loop ", "copy_out_done");
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
    bra(w, "@%p_loop ", "copy_out");
    w.label("copy_out_done");
}

/// Copies `%r_shared_nodes` elements from the global chain at `%rd_base` into shared memory at
/// `%r_schain`, every thread of the block taking every `%ntid.x`-th element.
fn copy_chain_to_shared(w: &mut EntryWriter) {
    w.comment("All threads of the block copy the chain into shared memory, strided by blockDim.x.");
    w.ins("mov.u32 %r_ntid, %ntid.x");
    w.ins("mov.u32 %r_i, %r_tid");
    w.ins("setp.ge.u32 %p_loop, %r_i, %r_shared_nodes");
    bra(w, "@%p_loop ", "fill_done");
    w.label("fill");
    w.ins("mul.wide.u32 %rd_fill_off, %r_i, 4");
    w.ins("add.s64 %rd_fill_addr, %rd_base, %rd_fill_off");
    w.ins("ld.global.u32 %r_value, [%rd_fill_addr]");
    w.ins("shl.b32 %r_fill_soff, %r_i, 2");
    w.ins("add.u32 %r_fill_saddr, %r_schain, %r_fill_soff");
    w.ins("st.shared.u32 [%r_fill_saddr], %r_value");
    w.ins("add.u32 %r_i, %r_i, %r_ntid");
    w.ins("setp.lt.u32 %p_loop, %r_i, %r_shared_nodes");
    bra(w, "@%p_loop ", "fill");
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

/// `chase_<path>` / `chase_fine_<path>`.
pub fn chase_entry(
    kernel: &'static Kernel,
    path: LoadPath,
    granularity: Granularity,
) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    let access = access(path);
    let fine = granularity == Granularity::Fine;
    let uses_shared_chain = path == LoadPath::Shared;

    w.comment(&format!(
        "{} chase through {} ({}). Thread 0 of each block chases the block's chain,",
        if fine { "Fine-grained" } else { "Coarse" },
        path.name(),
        access.load.split(' ').next().unwrap_or_default(),
    ));
    w.comment(
        "which starts at element ctaid.x * block_stride; indices are relative to that start.",
    );
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    if !uses_shared_chain {
        bra(&mut w, "@%p_idle ", "exit");
    }
    w.ins("mov.u32 %r_row, %ctaid.x");
    w.load_param("%r_warmup", "warmup_steps", ParamType::U32);
    w.load_param("%r_steps", "steps", ParamType::U32);
    first_element(&mut w);
    match path {
        LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc | LoadPath::Shared => {
            global_chain_base(&mut w);
        }
        LoadPath::Constant => {
            w.comment("The chain is the module's constant array; the `chain` parameter is unused.");
            let constant = pchase_kernels::catalogue::constant_chain();
            w.ins(&format!("mov.u64 %rd_const, {}", constant.name()));
            w.ins("shl.b64 %rd_first_bytes, %rd_first, 2");
            w.ins("add.s64 %rd_base, %rd_const, %rd_first_bytes");
        }
        LoadPath::Texture => {
            w.comment("`chain` is the texture object; texel coordinates are 32-bit.");
            w.load_param("%rd_chain", "chain", ParamType::U64);
            w.ins("cvt.u32.u64 %r_first, %rd_first");
        }
    }
    if fine || uses_shared_chain {
        w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    }
    if uses_shared_chain {
        w.load_param("%r_shared_nodes", "shared_nodes_elems", ParamType::U32);
        if fine {
            w.comment("The chain copy follows the latency and index arrays (8 * steps bytes).");
            w.ins("shl.b32 %r_timing_bytes, %r_steps, 3");
            w.ins("add.u32 %r_schain, %r_dyn, %r_timing_bytes");
        } else {
            w.ins("mov.u32 %r_schain, %r_dyn");
        }
        copy_chain_to_shared(&mut w);
        w.ins("bar.sync 0");
        w.comment("Only thread 0 chases; the others leave after the barrier.");
        bra(&mut w, "@%p_idle ", "exit");
    }
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
    if fine {
        timing_cursors(&mut w, "%r_steps");
        fine_timed_loop(&mut w, &access);
        w.blank();
        copy_timings_out(&mut w, "%r_steps", true);
        w.ins("st.global.u32 [%rd_block_out+4], %r_j");
    } else {
        coarse_timed_loop(&mut w, &access, "st.global.u32 [%rd_block_out+4], %r_j");
        w.load_param("%rd_out_cycles", "out_cycles", ParamType::U64);
        w.ins("cvta.to.global.u64 %rd_out_cycles, %rd_out_cycles");
        w.ins("add.s64 %rd_cycles_out, %rd_out_cycles, %rd_block_off");
        w.ins("st.global.u64 [%rd_cycles_out], %rd_cycles");
    }
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.label("exit");
    w.ins("ret");
    w.finish()
}

/// The coarse timed pass: one `%clock64` interval over `%r_steps` dependent loads, closed
/// after the final index is stored by `store_final` (an instruction storing `%r_j`, so the
/// last load is inside the interval); the interval ends in `%rd_cycles`.
fn coarse_timed_loop(w: &mut EntryWriter, access: &Access, store_final: &str) {
    w.comment("Timed pass as a whole: one %clock64 interval over `steps` dependent loads.");
    w.ins("mov.u32 %r_k, 0");
    w.ins("mov.u64 %rd_c0, %clock64");
    w.ins("setp.eq.u32 %p_loop, %r_steps, 0");
    bra(w, "@%p_loop ", "timed_done");
    w.label("timed");
    for instruction in &access.address {
        w.ins(instruction);
    }
    w.ins(&access.load);
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_steps");
    bra(w, "@%p_loop ", "timed");
    w.label("timed_done");
    w.comment("Storing the final index needs the last load's result: the closing clock read");
    w.comment("comes after it, so the last load is inside the interval.");
    w.ins(store_final);
    w.ins("mov.u64 %rd_c1, %clock64");
    w.ins("sub.u64 %rd_cycles, %rd_c1, %rd_c0");
}

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
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("setp.ne.u32 %p_idle, %r_tid, 0");
    bra(&mut w, "@%p_idle ", "published");
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
    bra(&mut w, "@%p_loop ", "published");
    w.label("find");
    w.ins("mul.wide.u32 %rd_sm_off, %r_row, 4");
    w.ins("add.s64 %rd_sm_addr, %rd_sms, %rd_sm_off");
    w.ins("ld.global.u32 %r_wanted, [%rd_sm_addr]");
    w.ins("setp.eq.u32 %p_found, %r_wanted, %r_smid");
    bra(&mut w, "@%p_found ", "found");
    w.ins("add.u32 %r_row, %r_row, 1");
    w.ins("setp.lt.u32 %p_loop, %r_row, %r_slots");
    bra(&mut w, "@%p_loop ", "find");
    bra(&mut w, "", "published");
    w.label("found");
    w.comment("Claim slot `row`: only the first block on this SM gets 0 back.");
    w.load_param("%rd_claims", "claims", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_claims, %rd_claims");
    w.ins("mul.wide.u32 %rd_claim_off, %r_row, 4");
    w.ins("add.s64 %rd_claim, %rd_claims, %rd_claim_off");
    w.ins("atom.global.cas.b32 %r_old, [%rd_claim], 0, 1");
    w.ins("setp.ne.u32 %p_taken, %r_old, 0");
    bra(&mut w, "@%p_taken ", "published");
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
    bra(&mut w, "@%p_all ", "all_claimed");
    w.ins("mov.u64 %rd_now, %clock64");
    w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_w0");
    w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_wait");
    bra(&mut w, "@%p_loop ", "wait");
    bra(&mut w, "", "publish");
    w.label("all_claimed");
    w.ins("mov.u32 %r_together, 1");
    w.label("publish");
    w.ins("st.shared.u32 [%r_dyn], %r_row");
    w.label("published");
    w.comment("Every thread learns whether the block has a slot; a block without one leaves.");
    w.ins("bar.sync 0");
    w.ins("ld.shared.u32 %r_row, [%r_dyn]");
    w.ins("setp.eq.u32 %p_none, %r_row, 0xffffffff");
    bra(&mut w, "@%p_none ", "exit");
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
    bra(&mut w, "@%p_lane ", "warmed");
    w.blank();
    warmup_loop(&mut w, &access);
    w.label("warmed");
    w.ins("bar.sync 0");
    bra(&mut w, "@%p_lane ", "passed");
    w.ins("shl.b32 %r_fin_off, %r_warp, 2");
    w.ins("add.u32 %r_fin, %r_dyn, %r_fin_off");
    coarse_timed_loop(&mut w, &access, "st.shared.u32 [%r_fin+16], %r_j");
    w.ins("atom.shared.add.u64 %rd_old_sum, [%r_dyn+8], %rd_cycles");
    w.label("passed");
    w.ins("bar.sync 0");
    w.comment("While warp 0 samples, the other warps go on chasing (untimed), so that every");
    w.comment("sampled load finds its line last loaded one array of loads ago, as in the timed");
    w.comment("pass, and under the same load; each stores its final index, which keeps it live.");
    bra(&mut w, "@%p_lane ", "exit");
    w.ins("setp.eq.u32 %p_warp0, %r_warp, 0");
    bra(&mut w, "@%p_warp0 ", "sampling");
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
    bra(&mut w, "", "exit");
    w.label("sampling");
    w.comment("Thread 0 from here: the samples, then the slot's record.");
    bra(&mut w, "@%p_idle ", "exit");
    w.ins("ld.shared.u64 %rd_sum, [%r_dyn+8]");
    w.load_param("%r_samples", "sample_steps", ParamType::U32);
    w.ins("setp.eq.u32 %p_loop, %r_samples, 0");
    bra(&mut w, "@%p_loop ", "sampled");
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
    row_pointer(
        &mut w,
        "out_slot",
        ["%rd_out_slot", "%rd_slot_off", "%rd_slot_out"],
        16,
    );
    row_pointer(
        &mut w,
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
    w.label("exit");
    w.ins("ret");
    w.finish()
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
    bra(&mut w, "@%p_idle ", "exit");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%r_count", "sm_count", ParamType::U32);
    w.ins("setp.ge.u32 %p_out, %r_smid, %r_count");
    bra(&mut w, "@%p_out ", "exit");
    w.load_param("%rd_claims", "claims", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_claims, %rd_claims");
    w.ins("mul.wide.u32 %rd_claim_off, %r_smid, 4");
    w.ins("add.s64 %rd_claim, %rd_claims, %rd_claim_off");
    w.ins("atom.global.cas.b32 %r_old, [%rd_claim], 0, 1");
    w.ins("setp.ne.u32 %p_taken, %r_old, 0");
    bra(&mut w, "@%p_taken ", "exit");
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
        bra(w, "@%p_ready ", &ready);
        w.ins("nanosleep.u32 500");
        w.ins("mov.u64 %rd_now, %globaltimer");
        w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_t0");
        w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_wait");
        bra(w, "@%p_loop ", label);
        w.ins(&format!("mov.u32 %r_status, {status}"));
        w.ins("st.global.u32 [%rd_status], %r_status");
        bra(w, "", "exit");
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
    bra(&mut w, "@%p_other ", "await_reference");
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
    bra(&mut w, "@%p_loop ", "arrays");
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
    bra(&mut w, "@%p_not_a ", "phase_a_done");
    untimed_loop(&mut w, &access_a, "%r_warmup_a", "warmup_a");
    w.label("phase_a_done");
    w.ins("bar.sync 0");
    w.blank();

    w.comment("Phase 2: thread_b loads chain B from index 0; the others wait at the barrier.");
    bra(&mut w, "@%p_not_b ", "phase_b_done");
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
    bra(&mut w, "@%p_not_a ", "exit");
    w.ins("mov.u32 %r_smid, %smid");
    w.ins(&format!("mov.u32 %r_dyn, {DYNAMIC_SHARED}"));
    timing_cursors(&mut w, "%r_steps");
    fine_timed_loop(&mut w, &access_a);
    w.blank();
    copy_timings_out(&mut w, "%r_steps", true);
    w.ins(&format!("st.global.u32 [%rd_block_out+4], {}", CHAIN.index));
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    w.label("exit");
    w.ins("ret");
    w.finish()
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
    bra(&mut w, "@!%p_filler ", "filled");
    copy_chain_to_shared(&mut w);
    w.label("filled");
    w.comment("Release the filled chain to the cluster; acquire it in rank 0.");
    w.ins("barrier.cluster.arrive");
    w.ins("barrier.cluster.wait");
    bra(&mut w, "@%p_idle ", "release");
    w.ins("mov.u32 %r_smid, %smid");
    w.load_param("%rd_out_block", "out_block", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out_block, %rd_out_block");
    w.ins("mul.wide.u32 %rd_block_off, %r_block, 8");
    w.ins("add.s64 %rd_block_out, %rd_out_block, %rd_block_off");
    w.ins("st.global.u32 [%rd_block_out], %r_smid");
    bra(&mut w, "@!%p_filler ", "chase");
    w.comment("Rank 1 does not chase: its index word is u32::MAX.");
    w.ins("mov.u32 %r_no_index, 0xFFFFFFFF");
    w.ins("st.global.u32 [%rd_block_out+4], %r_no_index");
    bra(&mut w, "", "release");
    w.label("chase");
    w.comment("Generic address of the chain in the shared memory of rank 1.");
    w.ins("cvt.u64.u32 %rd_schain, %r_schain");
    w.ins("cvta.shared.u64 %rd_schain_generic, %rd_schain");
    w.ins("mapa.u64 %rd_remote, %rd_schain_generic, 1");
    w.ins("mov.u32 %r_j, 0");
    w.blank();
    warmup_loop(&mut w, &dsmem_access());
    w.blank();
    timing_cursors(&mut w, "%r_steps");
    fine_timed_loop(&mut w, &dsmem_access());
    w.blank();
    copy_timings_out(&mut w, "%r_steps", true);
    w.ins("st.global.u32 [%rd_block_out+4], %r_j");
    w.label("release");
    w.comment("Every thread of both blocks arrives again, so rank 1 (and its shared memory)");
    w.comment("stays resident until rank 0 has finished reading it.");
    w.ins("barrier.cluster.arrive");
    w.ins("barrier.cluster.wait");
    w.ins("ret");
    w.finish()
}

/// `clock_overhead`: the fine loop without the load, storing the counter instead of an index.
pub fn clock_overhead_entry(kernel: &'static Kernel) -> Result<String, String> {
    let mut w = EntryWriter::new(kernel);
    w.comment("Thread 0 of block 0 times `samples` clock / shared store / clock sequences, the");
    w.comment("fine kernels' measurement without the load, to calibrate its overhead.");
    w.ins("mov.u32 %r_tid, %tid.x");
    w.ins("mov.u32 %r_block, %ctaid.x");
    w.ins("or.b32 %r_any, %r_tid, %r_block");
    w.ins("setp.ne.u32 %p_idle, %r_any, 0");
    bra(&mut w, "@%p_idle ", "exit");
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
    bra(&mut w, "@%p_loop ", "exit");
    w.label("copy_out");
    w.ins("ld.shared.u32 %r_value, [%r_slat]");
    w.ins("st.global.u32 [%rd_out], %r_value");
    w.ins("add.u32 %r_slat, %r_slat, 4");
    w.ins("add.s64 %rd_out, %rd_out, 4");
    w.ins("add.u32 %r_k, %r_k, 1");
    w.ins("setp.lt.u32 %p_loop, %r_k, %r_samples");
    bra(&mut w, "@%p_loop ", "copy_out");
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
    bra(&mut w, "@%p_idle ", "exit");
    w.load_param("%rd_spin", "spin_cycles", ParamType::U64);
    w.load_param("%rd_out", "out", ParamType::U64);
    w.ins("cvta.to.global.u64 %rd_out, %rd_out");
    w.ins("mov.u64 %rd_g0, %globaltimer");
    w.ins("mov.u64 %rd_c0, %clock64");
    w.label("spin");
    w.ins("mov.u64 %rd_now, %clock64");
    w.ins("sub.u64 %rd_elapsed, %rd_now, %rd_c0");
    w.ins("setp.lt.u64 %p_loop, %rd_elapsed, %rd_spin");
    bra(&mut w, "@%p_loop ", "spin");
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
    bra(&mut w, "@%p_loop ", "exit");
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
    bra(&mut w, "@%p_pad ", "padded");
    w.label("pad");
    w.ins("mul.wide.u32 %rd_word_bytes, %r_word, 4");
    w.ins("add.s64 %rd_word_addr, %rd_addr, %rd_word_bytes");
    w.ins("st.global.u32 [%rd_word_addr], %r_zero");
    w.ins("add.u32 %r_word, %r_word, 1");
    w.ins("setp.lt.u32 %p_pad, %r_word, %r_node_words");
    bra(&mut w, "@%p_pad ", "pad");
    w.label("padded");
    w.ins("add.s64 %rd_k, %rd_k, %rd_grid_threads");
    w.ins("setp.lt.u64 %p_loop, %rd_k, %rd_nodes");
    bra(&mut w, "@%p_loop ", "node");
    w.label("exit");
    w.ins("ret");
    w.finish()
}
