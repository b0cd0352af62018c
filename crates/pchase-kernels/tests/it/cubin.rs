//! The embedded cubins: one per module and listed architecture its minimum allows, each an
//! NVIDIA CUDA ELF image for exactly that architecture holding every kernel of its module,
//! assembled from the PTX that is embedded now; and a device gets one only on an exact match.

use object::read::elf::{ElfFile64, FileHeader};
use object::{Endianness, Object};
use pchase_kernels::{catalogue, cubin, icache, ComputeCapability, Module};

/// `e_machine` of NVIDIA's CUDA ELF images.
const EM_CUDA: u16 = 190;
/// `EI_OSABI` of a cubin of ELF ABI version 7 (`ELFOSABI_CUDA` in LLVM's `ELF.h`).
const ELFOSABI_CUDA: u8 = 0x33;
/// `EI_OSABI` of a cubin of ELF ABI version 8 (what ptxas 12.9 writes from sm_100 on).
const ELFOSABI_CUDA_ABI8: u8 = 0x41;

/// The architecture named by a cubin's ELF header: in the low byte of `e_flags` up to ABI
/// version 7 (sm_50 … sm_90), in the second byte from version 8 on (sm_100 and newer), as
/// `cuobjdump --dump-elf` shows for each (reprospect's `get_compute_capability_from_e_flags`
/// reads them the same way).
fn elf_sm(abi_version: u8, e_flags: u32) -> u32 {
    if abi_version >= 8 {
        (e_flags >> 8) & 0xff
    } else {
        e_flags & 0xff
    }
}

fn ptx_of(module: &Module) -> String {
    if std::ptr::eq(module, icache::module()) {
        icache::module_ptx(cubin::ICACHE_SEGMENTS).expect("icache PTX")
    } else {
        module.ptx().to_string()
    }
}

#[test]
fn every_module_has_a_cubin_for_every_listed_architecture_its_minimum_allows() {
    let mut expected = 0;
    for module in catalogue::modules() {
        for arch in cubin::ARCHITECTURES {
            let found = module.cubin(arch);
            if arch >= module.min_capability() {
                expected += 1;
                let found = found.unwrap_or_else(|| panic!("{} has no {arch}", module.name()));
                assert_eq!(found.capability(), arch);
                assert_eq!(found.module_name(), module.name());
            } else {
                assert!(
                    found.is_none(),
                    "{} below its minimum: {arch}",
                    module.name()
                );
            }
        }
    }
    assert_eq!(cubin::all().len(), expected);
}

#[test]
fn the_architectures_are_sorted_distinct_and_include_the_reference_gpus() {
    assert!(cubin::ARCHITECTURES.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(cubin::ARCHITECTURES[0], ComputeCapability::SM_50);
    // The H100 and H200 (the reference results) and the A100 load machine code.
    for cc in [ComputeCapability::SM_90, ComputeCapability::SM_80] {
        assert!(cubin::ARCHITECTURES.contains(&cc));
    }
}

#[test]
fn every_cubin_is_an_elf_image_for_its_architecture_with_every_kernel() {
    for cubin in cubin::all() {
        let name = format!("{} {}", cubin.module_name(), cubin.capability().sm_name());
        let image = cubin.image().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(image.len(), cubin.len(), "{name}");
        assert!(cubin.compressed_len() < cubin.len(), "{name}");
        let file = ElfFile64::<Endianness>::parse(image).unwrap_or_else(|e| panic!("{name}: {e}"));
        let header = file.elf_header();
        let endian = file.endian();
        let ident = header.e_ident();
        assert_eq!(header.e_machine(endian).0, EM_CUDA, "{name}");
        assert_eq!(header.e_type(endian), object::elf::ET_EXEC, "{name}");
        let cc = cubin.capability();
        let abi = ident.abi_version;
        assert_eq!(abi, if cc.major >= 10 { 8 } else { 7 }, "{name}");
        let os_abi = if abi >= 8 {
            ELFOSABI_CUDA_ABI8
        } else {
            ELFOSABI_CUDA
        };
        assert_eq!(ident.os_abi.0, os_abi, "{name}");
        let flags = header.e_flags(endian).0;
        assert_eq!(
            elf_sm(abi, flags),
            cc.major * 10 + cc.minor,
            "{name}: e_flags {flags:#x}"
        );
        let module = catalogue::modules()
            .iter()
            .find(|m| m.name() == cubin.module_name())
            .expect("a catalogue module");
        for kernel in catalogue::kernels_of(module) {
            assert!(
                file.symbol_by_name(kernel.entry()).is_some(),
                "{name} lacks {}",
                kernel.entry()
            );
        }
    }
}

#[test]
fn every_cubin_was_assembled_from_the_embedded_ptx() {
    // A template or the catalogue changed without `cargo xtask cubin`: the GPU would run the
    // old code. The fix is to run it and commit ptx/cubin/.
    for module in catalogue::modules() {
        let crc = crc32fast::hash(ptx_of(module).as_bytes());
        for cubin in cubin::all()
            .iter()
            .filter(|c| c.module_name() == module.name())
        {
            assert_eq!(
                cubin.ptx_crc32(),
                crc,
                "{} {} is stale: run `cargo xtask cubin`",
                module.name(),
                cubin.capability().sm_name()
            );
        }
    }
}

#[test]
fn the_icache_cubins_are_of_the_benchmark_size() {
    assert_eq!(cubin::ICACHE_SEGMENTS, icache::BENCHMARK_SEGMENTS);
    let h100 = icache::cubin(icache::BENCHMARK_SEGMENTS, ComputeCapability::SM_90)
        .expect("an sm_90 cubin");
    // 1 MiB of multiply-adds: the image holds at least that much code.
    assert!(h100.len() as u64 >= icache::code_bytes(icache::BENCHMARK_SEGMENTS));
    for segments in [1, icache::SAMPLE_SEGMENTS, icache::BENCHMARK_SEGMENTS / 2] {
        assert!(icache::cubin(segments, ComputeCapability::SM_90).is_none());
    }
}

#[test]
fn only_an_exact_capability_gets_a_cubin() {
    let pchase = catalogue::pchase_module();
    // Minor revisions not listed, and GPUs newer than the list, JIT-compile the PTX.
    for cc in [
        (5, 3),
        (6, 2),
        (7, 2),
        (8, 8),
        (9, 1),
        (11, 0),
        (12, 2),
        (13, 0),
    ] {
        let cc = ComputeCapability::new(cc.0, cc.1);
        assert!(!cubin::ARCHITECTURES.contains(&cc));
        assert!(pchase.cubin(cc).is_none(), "{cc}");
    }
    // Below a module's minimum there is none even for a listed architecture.
    assert!(catalogue::hopper_module()
        .cubin(ComputeCapability::SM_80)
        .is_none());
    assert!(pchase_kernels::copy::tma_module()
        .cubin(ComputeCapability::SM_90)
        .is_some());
}

#[test]
fn an_image_is_decompressed_once() {
    let cubin = catalogue::pchase_module()
        .cubin(ComputeCapability::SM_90)
        .expect("sm_90");
    let first = cubin.image().expect("image");
    let second = cubin.image().expect("image");
    assert!(std::ptr::eq(first, second));
}
