//! The bandwidth kernels: the catalogue's shapes, the module's on-demand loading, and the
//! PTX of each entry (its access instruction, its unroll, and the consumption of its loads).

use pchase_kernels::bandwidth::{self, BandwidthOp, ReadVariant, UNROLLS, VECTOR_BYTES};
use pchase_kernels::{catalogue, KernelKind, SharedLayout};

/// The body of entry `name` in the module text.
fn body<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("{name} missing"));
    let rest = &ptx[start..];
    let end = rest.find("\n}\n").expect("entry ends");
    &rest[..end]
}

#[test]
fn every_shape_has_one_kernel_and_only_the_bandwidth_and_copy_modules_load_on_demand() {
    for op in BandwidthOp::ALL {
        for vector in VECTOR_BYTES {
            for unroll in UNROLLS {
                let found = bandwidth::kernel(op, vector, unroll);
                let expected = op != BandwidthOp::Read(ReadVariant::Cs) || vector == 16;
                assert_eq!(found.is_some(), expected, "{op} v{vector} u{unroll}");
                if let Some(kernel) = found {
                    let shape = bandwidth::shape_of(kernel).expect("a bandwidth kernel");
                    assert_eq!(
                        (shape.op, shape.vector_bytes, shape.unroll),
                        (op, vector, unroll)
                    );
                    assert!(std::ptr::eq(kernel.module(), bandwidth::module()));
                }
            }
        }
    }
    assert!(bandwidth::kernel(BandwidthOp::Write, 32, 1).is_none());
    assert!(bandwidth::kernel(BandwidthOp::Write, 16, 3).is_none());
    for module in catalogue::modules() {
        assert_eq!(
            module.loaded_on_demand(),
            ["bandwidth", "asynccopy", "tma", "icache", "probes"].contains(&module.name()),
            "{}",
            module.name()
        );
    }
    assert!(bandwidth::shape_of(catalogue::init_chain()).is_none());
}

#[test]
fn each_entry_issues_its_instruction_unroll_times_per_iteration_and_uses_what_it_loads() {
    let ptx = bandwidth::module().ptx();
    for kernel in bandwidth::kernels() {
        let KernelKind::Bandwidth(shape) = kernel.kind() else {
            panic!("{} is not a bandwidth kernel", kernel.entry());
        };
        let text = body(ptx, kernel.entry());
        let words = shape.vector_bytes / 4;
        let ty = if words == 1 {
            ".u32".to_string()
        } else {
            format!(".v{words}.u32")
        };
        let (load, store) = match shape.op {
            BandwidthOp::Read(v) => (Some(format!("ld.global.{}{ty} ", v.name())), None),
            BandwidthOp::Write => (None, Some(format!("st.global{ty} "))),
            BandwidthOp::Copy => (
                Some(format!("ld.global.nc{ty} ")),
                Some(format!("st.global{ty} ")),
            ),
            BandwidthOp::SharedRead => (Some(format!("ld.shared{ty} ")), None),
        };
        let count = |needle: &str| text.matches(needle).count() as u32;
        if let Some(load) = &load {
            assert_eq!(count(load), shape.unroll, "{}: {load}", kernel.entry());
        }
        if let Some(store) = &store {
            assert_eq!(count(store), shape.unroll, "{}: {store}", kernel.entry());
        }
        let reads = matches!(shape.op, BandwidthOp::Read(_) | BandwidthOp::SharedRead);
        // Every loaded word goes into the accumulator, and the accumulator into the sink.
        assert_eq!(
            count("xor.b32 %r_acc"),
            if reads { shape.unroll * words } else { 0 },
            "{}",
            kernel.entry()
        );
        assert_eq!(count("st.global.u32 [%rd_saddr], %r_acc"), u32::from(reads));
        // Positions wrap by a mask (a power-of-two region), never by a remainder.
        assert_eq!(count("and.b32 %r_o"), shape.unroll, "{}", kernel.entry());
        assert!(!text.contains("rem."), "{}", kernel.entry());
        assert_eq!(
            kernel.shared_layout() == SharedLayout::Buffer,
            shape.op == BandwidthOp::SharedRead
        );
    }
}

#[test]
fn the_shared_region_is_passed_in_words() {
    let kernel = bandwidth::kernel(BandwidthOp::SharedRead, 16, 4).expect("kernel");
    assert_eq!(kernel.dynamic_shared_bytes(0, 8192).unwrap(), 32768);
    assert_eq!(kernel.param_index("mask"), Some(2));
}

#[test]
fn each_kernel_cut_alone_is_the_module_header_and_its_entry() {
    let ptx = bandwidth::module().ptx();
    let header_end = ptx.find("\n.visible .entry ").expect("an entry") + 1;
    for kernel in bandwidth::kernels() {
        let alone = bandwidth::kernel_ptx(kernel).expect("cut");
        assert!(alone.starts_with(&ptx[..header_end]), "{}", kernel.entry());
        assert_eq!(alone.matches(".entry ").count(), 1, "{}", kernel.entry());
        let entry = &alone[header_end..];
        assert!(entry.starts_with(&format!(".visible .entry {}(", kernel.entry())));
        assert!(entry.ends_with("\n}\n"));
        assert!(ptx.contains(entry));
    }
    assert!(bandwidth::kernel_ptx(catalogue::init_chain()).is_none());
}
