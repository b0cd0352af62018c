//! One binary, any machine: the CUDA driver is loaded at run time (crates/cuda-shim), so
//! without it everything but measuring works, and measuring says "no CUDA driver".

use std::process::{Command, Output};

use object::{
    elf,
    read::elf::{Dyn, ElfFile64},
    Endianness,
};

/// A driver library that cannot exist, so the test behaves the same on a GPU machine.
const NO_DRIVER: &str = "/nonexistent/memtopo-test/libcuda.so.1";

fn memtopo_without_driver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memtopo"))
        .args(args)
        .env("MEMTOPO_LIBCUDA", NO_DRIVER)
        .output()
        .unwrap()
}

#[test]
fn the_binary_does_not_link_libcuda() {
    let data = std::fs::read(env!("CARGO_BIN_EXE_memtopo")).unwrap();
    let file = ElfFile64::<Endianness>::parse(&*data).unwrap();
    let endian = file.endian();
    let sections = file.elf_section_table();
    let (entries, link) = sections
        .dynamic(endian, &*data)
        .unwrap()
        .expect("a dynamically linked binary");
    let strings = sections.strings(endian, &*data, link).unwrap();
    let needed: Vec<String> = entries
        .iter()
        .filter(|d| d.tag(endian) == elf::DT_NEEDED)
        .map(|d| String::from_utf8_lossy(d.string(endian, strings).unwrap()).into_owned())
        .collect();
    assert!(
        needed.iter().any(|n| n.starts_with("libc.so")),
        "{needed:?}"
    );
    assert!(!needed.iter().any(|n| n.contains("libcuda")), "{needed:?}");
}

#[test]
fn help_works_without_a_driver() {
    let out = memtopo_without_driver(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--simulate"));
}

#[test]
fn simulation_works_without_a_driver() {
    let out = memtopo_without_driver(&["--simulate", "volta", "--only", "l1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("L1"));
}

#[test]
fn measuring_without_a_driver_is_exit_code_3_naming_the_library() {
    let out = memtopo_without_driver(&["--only", "l1"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one clear line: {stderr}");
    assert!(
        stderr.starts_with("memtopo: error: no CUDA driver:") && stderr.contains(NO_DRIVER),
        "{stderr}"
    );
    assert!(stderr.contains("MEMTOPO_LIBCUDA"), "{stderr}");
}
