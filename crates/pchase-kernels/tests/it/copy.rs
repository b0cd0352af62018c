//! The copy kernels: each path issues its own instruction between the round's two clock
//! reads, the bulk copies announce their bytes before issuing and wait on the mbarrier's
//! phase, and the tensor form addresses its map through `cvta.param`.

use pchase_kernels::copy::{self, CopyPath};
use pchase_kernels::{catalogue, ComputeCapability, ParamType};

use crate::ptx_text::{parse_module, Instruction};

fn instructions(path: CopyPath) -> Vec<Instruction> {
    let kernel = copy::kernel(path);
    let module = parse_module(kernel.module().ptx());
    module
        .entry(kernel.entry())
        .instructions()
        .cloned()
        .collect()
}

fn position(list: &[Instruction], what: impl Fn(&Instruction) -> bool) -> usize {
    list.iter().position(what).expect("instruction present")
}

#[test]
fn every_path_copies_with_its_instruction_inside_the_timed_round() {
    for path in CopyPath::ALL {
        let list = instructions(path);
        let opcode = match path {
            CopyPath::Plain16 => "ld.global.cg.v4.u32",
            CopyPath::AsyncCa4 | CopyPath::AsyncCa8 | CopyPath::AsyncCa16 => {
                "cp.async.ca.shared.global"
            }
            CopyPath::AsyncCg16 => "cp.async.cg.shared.global",
            CopyPath::Bulk => "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
            CopyPath::BulkTensor2d => {
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
            }
        };
        let copies: Vec<&Instruction> = list.iter().filter(|i| i.opcode == opcode).collect();
        assert_eq!(copies.len(), 1, "{path}: one copy instruction");
        if let Some(width) = path.thread_width().filter(|_| path != CopyPath::Plain16) {
            assert_eq!(copies[0].operands[2], width.to_string(), "{path}");
        }
        let t0 = position(&list, Instruction::is_clock32_read);
        let t1 = list.len()
            - 1
            - list
                .iter()
                .rev()
                .position(Instruction::is_clock32_read)
                .unwrap();
        let at = position(&list, |i| i.opcode == opcode);
        assert!(
            t0 < at && at < t1,
            "{path}: the copy lies between the clocks"
        );
        // What completes the round comes before the closing clock read.
        let done = match path {
            CopyPath::Bulk | CopyPath::BulkTensor2d => "mbarrier.try_wait.parity.shared::cta.b64",
            CopyPath::Plain16 => "bar.sync",
            _ => "cp.async.wait_group",
        };
        let last_done = list.len() - 1 - list.iter().rev().position(|i| i.opcode == done).unwrap();
        assert!(
            at < last_done && last_done < t1,
            "{path}: {done} before the clock"
        );
    }
}

#[test]
fn bulk_copies_announce_their_bytes_first_and_the_tensor_map_is_a_parameter() {
    for path in [CopyPath::Bulk, CopyPath::BulkTensor2d] {
        let list = instructions(path);
        let init = position(&list, |i| i.opcode == "mbarrier.init.shared::cta.b64");
        let fence = position(&list, |i| i.opcode == "fence.proxy.async.shared::cta");
        let expect = position(&list, |i| {
            i.opcode == "mbarrier.arrive.expect_tx.shared::cta.b64"
        });
        let copy = position(&list, |i| i.opcode.starts_with("cp.async.bulk"));
        assert!(init < fence && fence < expect && expect < copy, "{path}");
    }
    let tensor = copy::kernel(CopyPath::BulkTensor2d);
    assert_eq!(tensor.params()[0].ty(), ParamType::TensorMap);
    let list = instructions(CopyPath::BulkTensor2d);
    assert!(list
        .iter()
        .any(|i| i.opcode == "cvta.param.u64" && i.operands[1] == "%rd_tmap_param"));
    assert!(list
        .iter()
        .any(|i| i.opcode == "mov.u64" && i.operands[1] == "param_tmap"));
}

#[test]
fn cp_async_needs_ampere_and_bulk_copies_hopper() {
    let ampere = ComputeCapability::SM_80;
    for path in CopyPath::ALL {
        let kernel = copy::kernel(path);
        assert_eq!(copy::path_of(kernel), Some(path));
        assert_eq!(kernel.module().supports(ampere), !path.is_bulk(), "{path}");
        assert!(kernel.check_supported(ComputeCapability::SM_90).is_ok());
        assert!(kernel
            .check_supported(ComputeCapability::new(7, 5))
            .is_err());
        assert!(kernel.module().loaded_on_demand());
    }
    assert!(copy::path_of(catalogue::init_chain()).is_none());
}
