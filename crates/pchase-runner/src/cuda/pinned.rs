//! Launches pinned to SMs: the SM-pinned chase and the L2 partition map.

use pchase_kernels::catalogue;

use super::{
    chains::ChainPlan,
    driver::{Arg, LaunchShape},
    handles::DeviceBuffer,
    to_host, CudaBackend,
};
use crate::{
    backend::{
        check_partition_map, check_pinned, Carveout, ChainSpec, ChaseMode, ChaseRequest, LoadPath,
        PartitionMapRequest, PartitionMapRun, PinnedRequest, PinnedRun, PinnedSlot,
        SmLineLatencies,
    },
    error::RunnerError,
};

/// Blocks per SM of a pinned launch: enough that every SM receives one.
const PINNED_BLOCKS_PER_SM: u32 = 4;

/// How long (SM cycles, about 70 ms at 2 GHz) a pinned slot waits for the others before it
/// chases alone (and reports that it did).
const PINNED_WAIT_CYCLES: u64 = 1 << 27;

/// How long (ns) an SM of the partition map waits for the others, the reference and its
/// turn, counted from its arrival; the whole map takes some 50 ms on an H200.
const MAP_WAIT_NS: u64 = 2_000_000_000;

impl CudaBackend {
    /// [`Backend::pinned_chase`](crate::backend::Backend::pinned_chase) on this GPU.
    pub(super) fn launch_pinned_chase(
        &mut self,
        request: &PinnedRequest,
    ) -> Result<PinnedRun, RunnerError> {
        check_pinned(request, self.info.sm_count)?;
        // The chains are laid out as for an ordinary chase with one block per slot.
        let as_chase = ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Coarse,
            chains: request.chains.clone(),
            warmup_steps: request.warmup_steps,
            steps: request.steps,
            carveout: Carveout::Percent(0),
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let plan = ChainPlan::new(&as_chase, &self.info)?;
        let chain = self.build_chains(&plan)?;
        let kernel = request.kernel()?;
        let function = self.function(kernel)?;
        let dynamic = kernel
            .dynamic_shared_bytes(request.sample_steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::Percent(0))?;
        let slots = request.sms.len();
        let samples = request.sample_steps as usize;
        let sms = self.inputs.upload(&request.sms, &self.stream)?;
        // Outputs: claims, u64 cycles, slot records, sampled latencies and indices.
        let out = self.outputs.outputs(
            &[
                slots + 1,
                2 * slots,
                4 * slots,
                slots * samples,
                slots * samples,
            ],
            &self.stream,
        )?;
        // Every slot's chain has the same length where there are several warps
        // (`check_pinned`), so one offset serves all.
        let first = request.chains[0];
        let warp_offset = request.start_node(&first, 1) * u64::from(plan.stride_elems);
        // Many more blocks than SMs, all resident at once, so that every SM receives at
        // least one.
        let shape = LaunchShape {
            grid: (PINNED_BLOCKS_PER_SM * self.info.sm_count.max(1), 1),
            threads: 32 * request.warps,
            shared_bytes: dynamic,
        };
        let gpu_time = self.timed_launch(
            &function,
            shape,
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(plan.block_stride)),
                ("sms", Arg::U64(sms)),
                ("slots", Arg::U32(slots as u32)),
                ("claims", Arg::U64(out.ptr(0))),
                ("wait_cycles", Arg::U64(PINNED_WAIT_CYCLES)),
                ("warmup_steps", Arg::U32(request.warmup_steps)),
                ("steps", Arg::U32(request.steps)),
                ("out_cycles", Arg::U64(out.ptr(1))),
                ("out_slot", Arg::U64(out.ptr(2))),
                ("warp_offset_elems", Arg::U64(warp_offset)),
                ("sample_steps", Arg::U32(request.sample_steps)),
                ("out_latency", Arg::U64(out.ptr(3))),
                ("out_index", Arg::U64(out.ptr(4))),
            ],
        )?;
        let host = out.read()?;
        let host_cycles = host.u64s(1);
        let (host_slot, host_latency, host_index) = (host.u32s(2), host.u32s(3), host.u32s(4));
        // Warp 0 starts at node 0 and makes warm-up, timed and sampled loads.
        let loads = u64::from(request.warmup_steps)
            + u64::from(request.steps)
            + u64::from(request.sample_steps);
        let warmed = u64::from(request.warmup_steps) + u64::from(request.steps);
        let mut out = Vec::with_capacity(slots);
        for (s, &wanted) in request.sms.iter().enumerate() {
            let record = &host_slot[4 * s..4 * s + 4];
            if record[0] == 0 {
                out.push(None);
                continue;
            }
            let slot = PinnedSlot {
                sm: record[1],
                total_cycles: host_cycles[s],
                final_index: record[2],
                together: record[3] != 0,
                samples: host_latency[s * samples..(s + 1) * samples].to_vec(),
            };
            if slot.sm != wanted {
                return Err(RunnerError::WrongResult(format!(
                    "pinned slot {s} ran on SM {}, not on SM {wanted}",
                    slot.sm
                )));
            }
            let expected = plan.index_after(s, loads);
            if slot.final_index != expected {
                return Err(RunnerError::WrongResult(format!(
                    "pinned slot {s} (SM {wanted}): the chase ended on index {}, the chain says {expected}",
                    slot.final_index
                )));
            }
            for (k, &got) in host_index[s * samples..(s + 1) * samples]
                .iter()
                .enumerate()
            {
                let expected = plan.index_after(s, warmed + k as u64 + 1);
                if got != expected {
                    return Err(RunnerError::WrongResult(format!(
                        "pinned slot {s}: sampled load {k} returned index {got}, the chain says {expected}"
                    )));
                }
            }
            out.push(Some(slot));
        }
        Ok(PinnedRun {
            slots: out,
            gpu_time,
        })
    }

    /// [`Backend::partition_map`](crate::backend::Backend::partition_map) on this GPU.
    pub(super) fn launch_partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        check_partition_map(request, self.info.sm_count)?;
        let kernel = catalogue::l2_partition_map();
        let function = self.function(kernel)?;
        let sm_count = self.info.sm_count;
        let lines = request.lines_per_sm;
        let chain_spec = ChainSpec::new(
            u64::from(lines) * u64::from(request.line_bytes),
            request.line_bytes,
        )?;
        let as_chase = ChaseRequest {
            path: LoadPath::GlobalCg,
            mode: ChaseMode::Fine,
            chains: vec![chain_spec; sm_count as usize],
            warmup_steps: 0,
            steps: 2 * lines,
            carveout: Carveout::Percent(0),
            flush_l2: false,
            reserve_shared_bytes: 0,
            written_bytes: 0,
        };
        let mut plan = ChainPlan::new(&as_chase, &self.info)?;
        // The arrays back to back (not each on its own aligned slot, as chases of several
        // blocks get): their lines then cover every address bit from the line up, which the
        // address map's fit needs.
        plan.block_stride = chain_spec.bytes / 4;
        let chain = self.build_chains(&plan)?;
        // The arrays start out of the L2: the reference's loads decide what it holds.
        self.flush_l2()?;
        let dynamic = kernel
            .dynamic_shared_bytes(2 * lines, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, Carveout::Percent(0))?;
        let claims = DeviceBuffer::<u32>::zeroed(sm_count as usize + 4)?;
        let per_sm = 2 * lines as usize;
        let latency = DeviceBuffer::<u32>::zeroed(sm_count as usize * per_sm)?;
        let status = DeviceBuffer::<u32>::zeroed(sm_count as usize)?;
        let shape = LaunchShape {
            grid: (PINNED_BLOCKS_PER_SM * sm_count.max(1), 1),
            threads: 32,
            shared_bytes: dynamic,
        };
        let gpu_time = self.timed_launch(
            &function,
            shape,
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(plan.block_stride)),
                ("lines", Arg::U32(lines)),
                ("sm_count", Arg::U32(sm_count)),
                ("reference", Arg::U32(request.reference_sm)),
                ("claims", Arg::U64(claims.device_ptr())),
                ("wait_ns", Arg::U64(MAP_WAIT_NS)),
                ("out_latency", Arg::U64(latency.device_ptr())),
                ("out_status", Arg::U64(status.device_ptr())),
            ],
        )?;
        let host_latency = to_host(&latency)?;
        let host_status = to_host(&status)?;
        let sms = host_status
            .iter()
            .enumerate()
            .map(|(sm, &state)| {
                if state != 1 {
                    if state != 0 {
                        log::debug!("partition map: SM {sm} gave up waiting (status {state})");
                    }
                    return None;
                }
                let row = &host_latency[sm * per_sm..(sm + 1) * per_sm];
                Some(SmLineLatencies {
                    cold: row[..lines as usize].to_vec(),
                    warm: row[lines as usize..].to_vec(),
                })
            })
            .collect();
        Ok(PartitionMapRun {
            sms,
            base_address: chain,
            array_stride: plan.block_stride * 4,
            gpu_time,
        })
    }
}
