//! Enables the AVX-512 search paths (`cfg(cpd_avx512)`) on compilers that
//! have the AVX-512 intrinsics stable (Rust 1.89); older compilers, down to the
//! workspace's minimum, build the portable paths only.

fn main() {
    autocfg::emit_possibility("cpd_avx512");
    if autocfg::new().probe_rustc_version(1, 89) {
        autocfg::emit("cpd_avx512");
    }
    autocfg::rerun_path("build.rs");
}
