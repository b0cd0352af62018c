//! Every catalogue kernel is an `.entry` of its module with exactly the catalogue's parameters.

use pchase_kernels::catalogue;
use pchase_kernels::KernelKind;

use crate::ptx_text::parse_module;

#[test]
fn every_catalogue_kernel_is_an_entry_with_the_catalogue_parameters() {
    for kernel in catalogue::kernels() {
        let ptx = kernel.module().ptx();
        let signature = format!(".entry {}(", kernel.entry());
        assert_eq!(
            ptx.matches(&signature).count(),
            1,
            "`{signature}` must appear exactly once in {}",
            kernel.module().file_name()
        );
        let module = parse_module(ptx);
        let entry = module.entry(kernel.entry());
        let expected: Vec<(String, String)> = kernel
            .params()
            .iter()
            .map(|p| (p.ty().ptx().to_owned(), format!("param_{}", p.name())))
            .collect();
        assert_eq!(entry.params, expected, "parameters of {}", kernel.entry());
    }
}

#[test]
fn modules_hold_no_entries_outside_the_catalogue() {
    for module in catalogue::modules() {
        let parsed = parse_module(module.ptx());
        let mut in_ptx: Vec<&str> = parsed.entries.iter().map(|e| e.name.as_str()).collect();
        let mut in_catalogue: Vec<&str> =
            catalogue::kernels_of(module).map(|k| k.entry()).collect();
        in_ptx.sort_unstable();
        in_catalogue.sort_unstable();
        assert_eq!(in_ptx, in_catalogue, "entries of {}", module.name());
    }
}

#[test]
fn every_entry_reads_only_its_own_parameters() {
    for kernel in catalogue::kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        for instruction in entry
            .instructions()
            .filter(|i| i.opcode.starts_with("ld.param"))
        {
            let operand = &instruction.operands[1];
            let name = operand.trim_start_matches("[param_").trim_end_matches(']');
            let param = kernel
                .params()
                .iter()
                .find(|p| p.name() == name)
                .unwrap_or_else(|| panic!("{} loads unknown parameter {operand}", kernel.entry()));
            assert_eq!(
                instruction.opcode,
                format!("ld.param{}", param.ty().ptx()),
                "{} loads {operand} with the wrong type",
                kernel.entry()
            );
        }
    }
}

#[test]
fn cluster_kernels_declare_their_cluster_shape() {
    for kernel in catalogue::kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        match kernel.cluster_dims() {
            Some([x, y, z]) => {
                assert!(entry.directives.iter().any(|d| d == ".explicitcluster"));
                assert!(
                    entry
                        .directives
                        .contains(&format!(".reqnctapercluster {x}, {y}, {z}")),
                    "{}: {:?}",
                    kernel.entry(),
                    entry.directives
                );
            }
            // The cluster kernels take their shape from the launch: `.explicitcluster` alone.
            None if matches!(
                kernel.kind(),
                KernelKind::ClusterChase | KernelKind::ClusterStream
            ) =>
            {
                assert_eq!(entry.directives, [".explicitcluster"], "{}", kernel.entry())
            }
            None => assert!(entry.directives.is_empty(), "{}", kernel.entry()),
        }
    }
}
