//! The templates of module `probes` (`pchase_kernels::probes`): one function per probe,
//! found by the probe's entry name in [`TEMPLATES`]. A new probe adds its function and its
//! line of the table here, and its `static` in the catalogue.

use pchase_kernels::{Kernel, ParamType};

use super::writer::EntryWriter;
use super::DYNAMIC_SHARED;

/// A probe's template: the PTX of its entry, from the catalogue's description.
type Template = fn(&'static Kernel) -> Result<String, String>;

/// Every probe's template, by entry name.
const TEMPLATES: &[(&str, Template)] = &[("shared_bank_conflicts", shared_bank_conflicts)];

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
    w.ins(&format!(
        "@%p_more bra {}",
        EntryWriter::label_name("timed")
    ));
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
