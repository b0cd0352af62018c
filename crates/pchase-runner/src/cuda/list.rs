//! The chase over an explicit list of lines ([`ListChaseRequest`]): the chain written from
//! the host into the chain buffer, then the fine chase kernel of the path, one block; and
//! several such chases at once, one block per SM, each block on a chain of its own.

use std::{os::raw::c_void, time::Duration};

use pchase_kernels::{catalogue, Granularity};

use super::{
    driver::{check, Arg, LaunchShape},
    ffi, CudaBackend,
};
use crate::{
    backend::{
        check_list_chase, check_list_chases, list_chain_bytes, BlockSamples, ChaseRun,
        ListChaseRequest,
    },
    error::RunnerError,
};

impl CudaBackend {
    /// [`Backend::list_chase`](crate::backend::Backend::list_chase) on this GPU.
    pub(super) fn launch_list_chase(
        &mut self,
        request: &ListChaseRequest,
    ) -> Result<ChaseRun, RunnerError> {
        check_list_chase(request)?;
        let words = u64::from(request.line_bytes / 4);
        let first = request.lines.iter().copied().min().unwrap_or(0);
        let last = request.lines.iter().copied().max().unwrap_or(0);
        let span = usize::try_from((last - first + 1) * words)
            .map_err(|_| RunnerError::InvalidRequest("a list chase too large".into()))?;
        // The chain's indices count from the smallest line; the chase starts at index 0, so
        // the list is rotated to begin there (the order stays the list's).
        let element = |line: u64| u32::try_from((line - first) * words).unwrap_or(u32::MAX);
        let n = request.lines.len();
        let start = request.lines.iter().position(|&l| l == first).unwrap_or(0);
        let mut host = vec![0u32; span];
        for i in 0..n {
            let (this, next) = (request.lines[i], request.lines[(i + 1) % n]);
            host[element(this) as usize] = element(next);
        }
        // Every line at its own place in the buffer (line L at L × line_bytes), whatever the
        // smallest line listed: a cache whose set depends on the address sees the same lines
        // in the same sets in every chase of a search that drops lines.
        let below = usize::try_from(first * words)
            .map_err(|_| RunnerError::InvalidRequest("a list chase too large".into()))?;
        let buffer = self.chain_storage((below + span) as u64)?;
        let chain = buffer + 4 * below as u64;
        // SAFETY: the buffer holds `below + span` words; pageable memory is staged before the
        // call returns, and the copy is ordered on the stream before the launch.
        check("cuMemcpyHtoDAsync", unsafe {
            ffi::cuMemcpyHtoDAsync(
                chain,
                host.as_ptr().cast::<c_void>(),
                4 * span,
                self.stream.handle(),
            )
        })?;
        let kernel = catalogue::chase(request.path, Granularity::Fine);
        let function = self.function(kernel)?;
        let steps = request.steps;
        let dynamic = kernel
            .dynamic_shared_bytes(steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, request.carveout)?;
        let out = self
            .outputs
            .outputs(&[2, steps as usize, steps as usize], &self.stream)?;
        let gpu_time = self.timed_launch(
            &function,
            LaunchShape {
                grid: (1, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(0)),
                ("shared_nodes_elems", Arg::U32(0)),
                ("warmup_steps", Arg::U32(request.warmup_steps)),
                ("steps", Arg::U32(steps)),
                ("out_block", Arg::U64(out.ptr(0))),
                ("out_latency", Arg::U64(out.ptr(1))),
                ("out_index", Arg::U64(out.ptr(2))),
            ],
        )?;
        let host_out = out.read()?;
        // Load k of the whole chase (warm-up included) reads the node at position
        // (start + k) mod n and returns the next one's index.
        let position = |k: u64| (start as u64 + k) % n as u64;
        let warm = u64::from(request.warmup_steps);
        let indices = host_out.u32s(2).to_vec();
        for (k, &got) in indices.iter().enumerate() {
            let expected = element(request.lines[position(warm + k as u64 + 1) as usize]);
            if got != expected {
                return Err(RunnerError::WrongResult(format!(
                    "list chase: timed load {k} returned index {got}, the list says {expected}"
                )));
            }
        }
        let block = host_out.u32s(0);
        let final_expected = element(request.lines[position(warm + u64::from(steps)) as usize]);
        if block[1] != final_expected {
            return Err(RunnerError::WrongResult(format!(
                "list chase: the chase ended on index {}, the list says {final_expected}",
                block[1]
            )));
        }
        Ok(ChaseRun {
            blocks: vec![BlockSamples {
                smid: block[0],
                latencies: host_out.u32s(1).to_vec(),
                indices,
                final_index: block[1],
                total_cycles: None,
            }],
            gpu_time,
        })
    }

    /// [`Backend::list_chases`](crate::backend::Backend::list_chases) on this GPU. The
    /// kernel starts every block at its chain's index 0, the smallest line: the chases that
    /// hold the smallest line of all run together, up to one per SM in a launch (a block's
    /// 30 KiB of samples leave room for one block per SM at the 32 KiB configuration), the
    /// others one at a time.
    pub(super) fn launch_list_chases(
        &mut self,
        requests: &[ListChaseRequest],
    ) -> Result<ChaseRun, RunnerError> {
        check_list_chases(requests)?;
        let mut out = ChaseRun {
            blocks: vec![BlockSamples::default(); requests.len()],
            gpu_time: Duration::ZERO,
        };
        let Some(low) = requests.iter().flat_map(|r| r.lines.iter().copied()).min() else {
            return Ok(out);
        };
        let (together, alone): (Vec<usize>, Vec<usize>) =
            (0..requests.len()).partition(|&i| requests[i].lines.contains(&low));
        let per_launch = self.info.sm_count.max(1) as usize;
        let mut one_at_a_time = alone;
        for group in together.chunks(per_launch) {
            let chosen: Vec<&ListChaseRequest> = group.iter().map(|&i| &requests[i]).collect();
            match self.launch_list_group(&chosen, low)? {
                Some(run) => {
                    out.gpu_time += run.gpu_time;
                    for (&i, block) in group.iter().zip(run.blocks) {
                        out.blocks[i] = block;
                    }
                }
                None => {
                    log::debug!(
                        "list chases: two blocks of one launch ran on one SM; its {} chases run one at a time",
                        group.len()
                    );
                    one_at_a_time.extend_from_slice(group);
                }
            }
        }
        for i in one_at_a_time {
            let run = self.launch_list_chase(&requests[i])?;
            out.gpu_time += run.gpu_time;
            out.blocks[i] = run.blocks.into_iter().next().unwrap_or_default();
        }
        Ok(out)
    }

    /// One launch of `requests` together, every list holding line `low`: chain `b` starts
    /// [`list_chain_bytes`] × `b` after the first. The first chain is written from the
    /// host; the others are copied from it on the device and patched where their lines'
    /// successors differ. `None` where two blocks ran on one SM (they would have shared its
    /// L1).
    fn launch_list_group(
        &mut self,
        requests: &[&ListChaseRequest],
        low: u64,
    ) -> Result<Option<ChaseRun>, RunnerError> {
        let first = requests[0];
        let blocks = requests.len();
        let words = u64::from(first.line_bytes / 4);
        let high = requests
            .iter()
            .flat_map(|r| r.lines.iter().copied())
            .max()
            .unwrap_or(low);
        let apart = list_chain_bytes(high, first.line_bytes);
        let too_large = || RunnerError::InvalidRequest("list chases too large".into());
        let span = usize::try_from((high - low + 1) * words).map_err(|_| too_large())?;
        let element = |line: u64| u32::try_from((line - low) * words).unwrap_or(u32::MAX);
        let successors = |r: &ListChaseRequest| {
            let n = r.lines.len();
            (0..n)
                .map(|i| (element(r.lines[i]), element(r.lines[(i + 1) % n])))
                .collect::<Vec<_>>()
        };
        let storage = self.chain_storage(blocks as u64 * apart / 4)?;
        let chain = storage + 4 * low * words;
        let mut host = vec![0u32; span];
        for (this, next) in successors(first) {
            host[this as usize] = next;
        }
        let stream = self.stream.handle();
        // SAFETY: chain 0 holds `span` words inside the storage; pageable memory is staged
        // before the call returns, and the copy is ordered on the stream before the launch.
        check("cuMemcpyHtoDAsync", unsafe {
            ffi::cuMemcpyHtoDAsync(chain, host.as_ptr().cast::<c_void>(), 4 * span, stream)
        })?;
        // (address, value) of every word in which a chain differs from the first.
        let mut patches: Vec<(u64, u32)> = Vec::new();
        for (b, request) in requests.iter().enumerate().skip(1) {
            let own = chain + b as u64 * apart;
            // SAFETY: both chains hold `span` words inside the storage; ordered on the stream.
            check("cuMemcpyDtoDAsync", unsafe {
                ffi::cuMemcpyDtoDAsync(own, chain, 4 * span, stream)
            })?;
            for (this, next) in successors(request) {
                if host[this as usize] != next {
                    patches.push((own + 4 * u64::from(this), next));
                }
            }
        }
        for (address, value) in &patches {
            // SAFETY: one word inside chain b; pageable memory is staged before the call
            // returns.
            check("cuMemcpyHtoDAsync", unsafe {
                ffi::cuMemcpyHtoDAsync(*address, (value as *const u32).cast::<c_void>(), 4, stream)
            })?;
        }
        let kernel = catalogue::chase(first.path, Granularity::Fine);
        let function = self.function(kernel)?;
        let steps = first.steps;
        let dynamic = kernel
            .dynamic_shared_bytes(steps, 0)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        self.configure_shared(&function, dynamic, first.carveout)?;
        let per_block = steps as usize;
        let out = self.outputs.outputs(
            &[2 * blocks, blocks * per_block, blocks * per_block],
            &self.stream,
        )?;
        let gpu_time = self.timed_launch(
            &function,
            LaunchShape {
                grid: (blocks as u32, 1),
                threads: 32,
                shared_bytes: dynamic,
            },
            &[
                ("chain", Arg::U64(chain)),
                ("block_stride", Arg::U64(apart / 4)),
                ("shared_nodes_elems", Arg::U32(0)),
                ("warmup_steps", Arg::U32(first.warmup_steps)),
                ("steps", Arg::U32(steps)),
                ("out_block", Arg::U64(out.ptr(0))),
                ("out_latency", Arg::U64(out.ptr(1))),
                ("out_index", Arg::U64(out.ptr(2))),
            ],
        )?;
        let host_out = out.read()?;
        let (ends, latencies, indices) = (host_out.u32s(0), host_out.u32s(1), host_out.u32s(2));
        let mut sms: Vec<u32> = (0..blocks).map(|b| ends[2 * b]).collect();
        sms.sort_unstable();
        if sms.windows(2).any(|w| w[0] == w[1]) {
            return Ok(None);
        }
        let warm = u64::from(first.warmup_steps);
        let mut results = Vec::with_capacity(blocks);
        for (b, request) in requests.iter().enumerate() {
            // Load k of the whole chase reads the node at position (start + k) mod n.
            let n = request.lines.len() as u64;
            let start = request.lines.iter().position(|&l| l == low).unwrap_or(0) as u64;
            let expected = |k: u64| element(request.lines[((start + k) % n) as usize]);
            let range = b * per_block..(b + 1) * per_block;
            for (k, &got) in indices[range.clone()].iter().enumerate() {
                let want = expected(warm + k as u64 + 1);
                if got != want {
                    return Err(RunnerError::WrongResult(format!(
                        "list chase {b} of {blocks}: timed load {k} returned index {got}, the list says {want}"
                    )));
                }
            }
            let end = expected(warm + u64::from(steps));
            if ends[2 * b + 1] != end {
                return Err(RunnerError::WrongResult(format!(
                    "list chase {b} of {blocks}: the chase ended on index {}, the list says {end}",
                    ends[2 * b + 1]
                )));
            }
            results.push(BlockSamples {
                smid: ends[2 * b],
                latencies: latencies[range.clone()].to_vec(),
                indices: indices[range].to_vec(),
                final_index: end,
                total_cycles: None,
            });
        }
        Ok(Some(ChaseRun {
            blocks: results,
            gpu_time,
        }))
    }
}
