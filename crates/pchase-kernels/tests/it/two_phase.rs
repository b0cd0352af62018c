//! The two-phase probes: every thread of the block reaches both barriers, each phase runs in
//! its own thread through its own path on its own chain, and the Constant path uses the
//! chain argument as an element offset into the constant array.

use pchase_kernels::{catalogue, Kernel, LoadPath};

use crate::ptx_text::{parse_module, Entry, Instruction, Statement};
use crate::timing_order::path_load;

fn two_phase_kernels() -> Vec<(&'static Kernel, LoadPath, LoadPath)> {
    let mut kernels = Vec::new();
    for first in catalogue::TWO_PHASE_PATHS {
        for second in catalogue::TWO_PHASE_PATHS {
            let kernel = catalogue::two_phase(first, second).expect("pair exists");
            kernels.push((kernel, first, second));
        }
    }
    kernels
}

/// The body of an entry split at its barriers: three segments for a two-phase kernel.
struct Segments<'a> {
    body: &'a [Statement],
    /// Statement indices of the `bar` instructions.
    barriers: Vec<usize>,
}

impl<'a> Segments<'a> {
    fn new(entry: &'a Entry) -> Self {
        let barriers = (0..entry.body.len())
            .filter(|&i| {
                matches!(&entry.body[i], Statement::Instruction(ins) if ins.opcode.starts_with("bar"))
            })
            .collect();
        Self {
            body: &entry.body,
            barriers,
        }
    }

    /// Which segment (0 = before the first barrier) statement `index` lies in.
    fn segment_of(&self, index: usize) -> usize {
        self.barriers.iter().filter(|&&b| b < index).count()
    }

    fn label_index(&self, label: &str) -> usize {
        self.body
            .iter()
            .position(|s| matches!(s, Statement::Label(l) if l == label))
            .unwrap_or_else(|| panic!("no label {label}"))
    }

    /// Instructions of segment `segment`, with their statement indices.
    fn instructions(&self, segment: usize) -> Vec<(usize, &'a Instruction)> {
        self.body
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Statement::Instruction(ins)
                    if self.segment_of(i) == segment && !self.barriers.contains(&i) =>
                {
                    Some((i, ins))
                }
                _ => None,
            })
            .collect()
    }
}

fn instructions(entry: &Entry) -> Vec<Instruction> {
    entry.instructions().cloned().collect()
}

/// Registers derived from any of `seeds` (registers or special registers) over the whole
/// body, repeated so that values carried around loops are followed too.
fn derived_from(body: &[Instruction], seeds: &[String]) -> Vec<String> {
    let mut tainted = seeds.to_vec();
    for _ in 0..3 {
        for instruction in body {
            if instruction.uses().iter().any(|u| tainted.contains(u)) {
                for def in instruction.defs() {
                    if !tainted.contains(&def) {
                        tainted.push(def);
                    }
                }
            }
        }
    }
    tainted
}

/// The registers `ld.param` of `param_<name>` writes.
fn param_registers(body: &[Instruction], name: &str) -> Vec<String> {
    let operand = format!("[param_{name}]");
    body.iter()
        .filter(|i| i.opcode.starts_with("ld.param") && i.operands.get(1) == Some(&operand))
        .map(|i| i.operands[0].clone())
        .collect()
}

/// Registers an instruction's address operand reads (a load's last operand).
fn address_registers(load: &Instruction) -> Vec<String> {
    Instruction::registers_in(load.operands.last().expect("load with an address"))
}

#[test]
fn every_thread_reaches_both_barriers() {
    for (kernel, _, _) in two_phase_kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let segments = Segments::new(entry);
        let name = kernel.entry();
        assert_eq!(segments.barriers.len(), 2, "{name}: two barriers");
        for &b in &segments.barriers {
            let Statement::Instruction(barrier) = &entry.body[b] else {
                unreachable!()
            };
            assert_eq!(barrier.opcode, "bar.sync", "{name}");
            assert_eq!(barrier.operands, ["0"], "{name}: barrier 0, whole block");
            assert_eq!(barrier.predicate, None, "{name}: unconditional barrier");
        }
        // No thread leaves before the second barrier...
        for (i, statement) in entry.body.iter().enumerate() {
            if let Statement::Instruction(ins) = statement {
                if ins.opcode == "ret" || ins.opcode == "exit" || ins.opcode == "trap" {
                    assert!(
                        i > segments.barriers[1],
                        "{name}: `{}` before the second barrier",
                        ins.opcode
                    );
                }
            }
        }
        // ...and no branch jumps over (or back across) a barrier: every branch target lies
        // in the branch's own barrier-delimited segment.
        for (i, statement) in entry.body.iter().enumerate() {
            if let Statement::Instruction(ins) = statement {
                if let Some(target) = ins.branch_target() {
                    let t = segments.label_index(target);
                    assert_eq!(
                        segments.segment_of(t),
                        segments.segment_of(i),
                        "{name}: branch to {target} crosses a barrier"
                    );
                }
            }
        }
    }
}

#[test]
fn each_phase_runs_only_in_its_thread_and_through_its_path() {
    for (kernel, first, second) in two_phase_kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let body = instructions(entry);
        let segments = Segments::new(entry);
        let name = kernel.entry();
        let tid = body
            .iter()
            .find(|i| i.operands.get(1).is_some_and(|o| o == "%tid.x"))
            .map(|i| i.operands[0].clone())
            .unwrap_or_else(|| panic!("{name} never reads %tid.x"));
        // `setp.ne p, tid, thread_x`: the predicate of the threads that skip phase x.
        let skip_predicate = |param: &str| {
            let thread = param_registers(&body, param);
            body.iter()
                .find(|i| {
                    i.opcode == "setp.ne.u32"
                        && i.operands[1] == tid
                        && thread.contains(&i.operands[2])
                })
                .map(|i| i.operands[0].clone())
                .unwrap_or_else(|| panic!("{name}: no `setp.ne.u32 p, tid, {param}`"))
        };
        let phases = [
            (skip_predicate("thread_a"), path_load(first)),
            (skip_predicate("thread_b"), path_load(second)),
            (skip_predicate("thread_a"), path_load(first)),
        ];
        for (segment, (skip, load)) in phases.iter().enumerate() {
            let statements = segments.instructions(segment);
            let loads: Vec<usize> = statements
                .iter()
                .filter(|(_, i)| i.is_memory_load() && !i.opcode.starts_with("ld.shared"))
                .map(|&(index, i)| {
                    assert_eq!(i.opcode, *load, "{name}: phase {segment} loads");
                    index
                })
                .collect();
            assert!(!loads.is_empty(), "{name}: phase {segment} loads nothing");
            // Before the phase's first load, the other threads branch past its last load.
            let guard = statements
                .iter()
                .find(|(_, i)| i.predicate.as_deref() == Some(skip.as_str()) && i.opcode == "bra")
                .unwrap_or_else(|| panic!("{name}: phase {segment} is not guarded by {skip}"));
            let target = segments.label_index(guard.1.branch_target().unwrap());
            assert!(
                guard.0 < loads[0] && target > *loads.last().unwrap(),
                "{name}: the guard of phase {segment} does not skip all its loads"
            );
        }
    }
}

#[test]
fn each_phase_chases_its_own_chain_at_the_block_offset() {
    for (kernel, first, second) in two_phase_kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let body = instructions(entry);
        let segments = Segments::new(entry);
        let name = kernel.entry();
        let from = |params: &[&str]| {
            let seeds: Vec<String> = params
                .iter()
                .flat_map(|p| param_registers(&body, p))
                .collect();
            assert!(!seeds.is_empty(), "{name} never loads {params:?}");
            derived_from(&body, &seeds)
        };
        let from_chain_a = from(&["chain_a"]);
        let from_stride_a = from(&["block_stride_a"]);
        let from_chain_b = from(&["chain_b"]);
        let from_stride_b = from(&["block_stride_b"]);
        let from_block = derived_from(&body, &["%ctaid".to_owned()]);
        for (segment, path) in [(0, first), (1, second), (2, first)] {
            let (own, own_stride, other) = if segment == 1 {
                (&from_chain_b, &from_stride_b, &from_chain_a)
            } else {
                (&from_chain_a, &from_stride_a, &from_chain_b)
            };
            for (_, load) in segments.instructions(segment) {
                if load.opcode != path_load(path) {
                    continue;
                }
                let address = address_registers(load);
                for (what, derived) in [
                    ("its chain argument", own),
                    ("its block stride", own_stride),
                    ("%ctaid.x", &from_block),
                ] {
                    assert!(
                        address.iter().any(|r| derived.contains(r)),
                        "{name}: phase {segment} address {address:?} ignores {what}"
                    );
                }
                assert!(
                    !address.iter().any(|r| other.contains(r)),
                    "{name}: phase {segment} address {address:?} uses the other chain"
                );
            }
        }
    }
}

#[test]
fn constant_phases_offset_the_constant_array_by_the_chain_argument() {
    let constant = catalogue::constant_chain().name();
    let mut checked = 0;
    for (kernel, first, second) in two_phase_kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let body = instructions(entry);
        let name = kernel.entry();
        let array: Vec<String> = body
            .iter()
            .filter(|i| i.opcode == "mov.u64" && i.operands.get(1).is_some_and(|o| o == constant))
            .map(|i| i.operands[0].clone())
            .collect();
        let from_array = derived_from(&body, &array);
        for (path, param) in [(first, "chain_a"), (second, "chain_b")] {
            if path != LoadPath::Constant {
                continue;
            }
            let from_offset = derived_from(&body, &param_registers(&body, param));
            let loads: Vec<&Instruction> = body
                .iter()
                .filter(|i| i.opcode == "ld.const.u32")
                .filter(|i| address_registers(i).iter().any(|r| from_offset.contains(r)))
                .collect();
            assert!(
                !loads.is_empty(),
                "{name}: no constant load offset by {param}"
            );
            for load in loads {
                assert!(
                    address_registers(load)
                        .iter()
                        .any(|r| from_array.contains(r)),
                    "{name}: {param} offsets something other than {constant}"
                );
            }
            // The offset is in elements: it is added before the scaling by 4.
            let offset_regs = param_registers(&body, param);
            let add = body
                .iter()
                .position(|i| {
                    i.opcode == "add.s64" && i.uses().iter().any(|u| offset_regs.contains(u))
                })
                .unwrap_or_else(|| panic!("{name}: {param} is never added"));
            let sum = &body[add].operands[0];
            assert!(
                body[add..].iter().any(|i| i.opcode == "shl.b64"
                    && i.operands[1] == *sum
                    && i.operands[2] == "2"),
                "{name}: {param} + block offset is not scaled from elements to bytes"
            );
            checked += 1;
        }
    }
    // Constant as chain A in 5 kernels, as chain B in 5 (constant_constant counts twice).
    assert_eq!(checked, 10);
}

#[test]
fn chain_b_is_stored_so_its_loads_stay_live_and_a_overwrites_it() {
    for (kernel, first, second) in two_phase_kernels() {
        let module = parse_module(kernel.module().ptx());
        let entry = module.entry(kernel.entry());
        let segments = Segments::new(entry);
        let name = kernel.entry();
        let out_block = derived_from(
            &instructions(entry),
            &param_registers(&instructions(entry), "out_block"),
        );
        let final_index_store = |segment: usize, index: &str| {
            segments
                .instructions(segment)
                .into_iter()
                .find(|(_, i)| {
                    i.opcode.starts_with("st.global")
                        && i.operands[1] == index
                        && i.operands[0].ends_with("+4]")
                        && Instruction::registers_in(&i.operands[0])
                            .iter()
                            .any(|r| out_block.contains(r))
                })
                .map(|(_, i)| i.operands[0].clone())
        };
        let index_of = |segment: usize, load: &str| {
            segments
                .instructions(segment)
                .into_iter()
                .find(|(_, i)| i.opcode == load)
                .map(|(_, i)| i.defs()[0].clone())
                .unwrap_or_else(|| panic!("{name}: no {load} in phase {segment}"))
        };
        let b_index = index_of(1, path_load(second));
        let b_store = final_index_store(1, &b_index)
            .unwrap_or_else(|| panic!("{name}: chain B's final index {b_index} is not stored"));
        let a_index = index_of(2, path_load(first));
        let a_store = final_index_store(2, &a_index)
            .unwrap_or_else(|| panic!("{name}: chain A's final index {a_index} is not stored"));
        assert_eq!(
            a_store, b_store,
            "{name}: A's final index must overwrite B's word"
        );
    }
}
