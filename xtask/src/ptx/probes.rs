//! The templates of module `probes` (`pchase_kernels::probes`): one function per probe,
//! found by the probe's entry name in [`TEMPLATES`]. A new probe adds its function and its
//! line of the table here, and its `static` in the catalogue.

use pchase_kernels::Kernel;

/// A probe's template: the PTX of its entry, from the catalogue's description.
type Template = fn(&'static Kernel) -> Result<String, String>;

/// Every probe's template, by entry name.
const TEMPLATES: &[(&str, Template)] = &[];

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
