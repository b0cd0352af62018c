//! The chase over an explicit list of lines ([`ListChaseRequest`]): the chain written from
//! the host into the chain buffer, then the fine chase kernel of the path, one block.

use std::os::raw::c_void;

use pchase_kernels::{catalogue, Granularity};

use super::{
    driver::{check, Arg, LaunchShape},
    ffi, CudaBackend,
};
use crate::{
    backend::{check_list_chase, BlockSamples, ChaseRun, ListChaseRequest},
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
}
