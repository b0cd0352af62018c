//! The cluster launches: limits, the chase through any rank's shared memory, and
//! the stream over distributed shared memory.

use std::time::Duration;

use pchase_kernels::catalogue::{self, CLUSTER_BLOCK_WORDS};

use super::{
    cluster_driver::{self, ClusterShape},
    driver::{Arg, LoadedFunction},
    CudaBackend,
};
use crate::{
    backend::Carveout,
    cluster::{
        check_cluster_shape, check_stream, one_block_per_sm_shared, ClusterBackend, ClusterChase,
        ClusterChaseRequest, ClusterChaseRun, ClusterLimits, ClusterPlacement,
        ClusterStreamRequest, ClusterStreamRun, CLUSTER_SIZES, PORTABLE_CLUSTER_SIZE,
    },
    error::RunnerError,
};

/// Threads per block of the chase (thread 0 chases; all copy the chain).
const CHASE_THREADS: u32 = 128;

/// A cyclic chain over `nodes` nodes `stride_elems` elements apart, in element indices.
fn host_chain(nodes: u64, stride_elems: u64) -> Vec<u32> {
    let mut chain = vec![0u32; (nodes * stride_elems) as usize];
    for node in 0..nodes {
        let next = ((node + 1) % nodes) * stride_elems;
        chain[(node * stride_elems) as usize] = next as u32;
    }
    chain
}

/// Parses the `out_block` rows of a cluster launch.
fn placements(rows: &[u32]) -> Vec<(ClusterPlacement, u32)> {
    rows.chunks_exact(CLUSTER_BLOCK_WORDS as usize)
        .enumerate()
        .map(|(block, w)| {
            (
                ClusterPlacement {
                    block: block as u32,
                    sm: w[0],
                    rank: w[1],
                    cluster: w[2],
                },
                w[3],
            )
        })
        .collect()
}

impl CudaBackend {
    /// A function of the cluster kernels, with its shared memory and (above 8 blocks) the
    /// non-portable sizes allowed.
    fn cluster_function(
        &self,
        kernel: &'static pchase_kernels::Kernel,
        shared_bytes: u32,
        cluster_size: u32,
    ) -> Result<LoadedFunction, RunnerError> {
        let function = self.function(kernel)?;
        self.configure_shared(&function, shared_bytes, Carveout::DriverDefault)?;
        if cluster_size > PORTABLE_CLUSTER_SIZE {
            cluster_driver::allow_non_portable(&function)?;
        }
        Ok(function)
    }

    /// Launches a cluster kernel timed with events and waits for it.
    fn timed_cluster_launch(
        &self,
        function: &LoadedFunction,
        shape: ClusterShape,
        args: &[(&str, Arg)],
    ) -> Result<Duration, RunnerError> {
        self.timed(|stream| cluster_driver::launch_clusters(function, shape, stream, args))
    }

    fn one_block_shared(&self, needed: u64) -> Result<u32, RunnerError> {
        one_block_per_sm_shared(
            needed,
            self.info.shared_per_sm_bytes,
            self.info.shared_per_block_optin_bytes,
        )
        .ok_or_else(|| {
            RunnerError::InvalidRequest(format!(
                "{needed} B of shared memory per block do not fit one block per SM"
            ))
        })
    }
}

impl ClusterBackend for CudaBackend {
    fn cluster_limits(&mut self, shared_bytes: u32) -> Result<ClusterLimits, RunnerError> {
        let kernel = catalogue::dsmem_cluster_chase();
        let shared = self.one_block_shared(u64::from(shared_bytes))?;
        let mut active_clusters = Vec::new();
        for size in CLUSTER_SIZES {
            let shape = ClusterShape {
                cluster_size: size,
                clusters: 1,
                threads: CHASE_THREADS,
                shared_bytes: shared,
            };
            // A size the device refuses (above 8 where non-portable sizes are not allowed) is
            // an error of the attribute or the query: that size has no resident cluster.
            let active = self
                .cluster_function(kernel, shared, size)
                .and_then(|f| cluster_driver::max_active_clusters(&f, shape, self.stream.handle()));
            match active {
                Ok(n) => active_clusters.push((size, n)),
                Err(e) if size > PORTABLE_CLUSTER_SIZE => {
                    log::info!("cluster size {size} not available: {e}");
                    active_clusters.push((size, 0));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ClusterLimits { active_clusters })
    }

    fn cluster_chase(
        &mut self,
        request: &ClusterChaseRequest,
    ) -> Result<ClusterChaseRun, RunnerError> {
        check_cluster_shape(request.cluster_size, request.clusters)?;
        let kernel = request.kernel();
        let chain = request.chain;
        let elements = u32::try_from(chain.elements()).map_err(|_| {
            RunnerError::InvalidRequest("the chain is too long for shared memory".into())
        })?;
        let needed = kernel
            .dynamic_shared_bytes(request.steps, elements)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        let shared = self.one_block_shared(u64::from(needed))?;
        let function = self.cluster_function(kernel, shared, request.cluster_size)?;
        let stride_elems = u64::from(chain.stride / 4);
        let host = host_chain(chain.nodes(), stride_elems);
        // The chain and the outputs are regions of the reused input and output buffers.
        let chain_ptr = self.inputs.upload(&host, &self.stream)?;
        let clusters = request.clusters as usize;
        let blocks = clusters * request.cluster_size as usize;
        let steps = request.steps as usize;
        let out = self.outputs.outputs(
            &[
                clusters * steps,
                clusters * steps,
                blocks * CLUSTER_BLOCK_WORDS as usize,
            ],
            &self.stream,
        )?;
        let shape = ClusterShape {
            cluster_size: request.cluster_size,
            clusters: request.clusters,
            threads: CHASE_THREADS,
            shared_bytes: shared,
        };
        let gpu_time = self.timed_cluster_launch(
            &function,
            shape,
            &[
                ("chain", Arg::U64(chain_ptr)),
                ("shared_nodes_elems", Arg::U32(elements)),
                ("warmup_steps", Arg::U32(request.warmup_steps)),
                ("steps", Arg::U32(request.steps)),
                ("target_offset", Arg::U32(request.target_offset)),
                ("out_latency", Arg::U64(out.ptr(0))),
                ("out_index", Arg::U64(out.ptr(1))),
                ("out_block", Arg::U64(out.ptr(2))),
            ],
        )?;
        let host_out = out.read()?;
        let rows = placements(host_out.u32s(2));
        let (latencies, indices) = (host_out.u32s(0), host_out.u32s(1));
        let mut chases = Vec::with_capacity(clusters);
        for (chaser, target_rank) in rows.iter().filter(|(p, _)| p.rank == 0) {
            let target_sm = rows
                .iter()
                .find(|(p, _)| p.cluster == chaser.cluster && p.rank == *target_rank)
                .map(|(p, _)| p.sm)
                .ok_or_else(|| {
                    RunnerError::WrongResult(format!(
                        "cluster {} reports target rank {target_rank}, which no block of it has",
                        chaser.cluster
                    ))
                })?;
            let c = chaser.cluster as usize;
            if c >= clusters {
                return Err(RunnerError::WrongResult(format!(
                    "a block reports cluster {c} of {clusters}"
                )));
            }
            // The chase starts at node 0 and makes warm-up + k loads before timed load k.
            let nodes = chain.nodes();
            for (k, &got) in indices[c * steps..(c + 1) * steps].iter().enumerate() {
                let loads = u64::from(request.warmup_steps) + k as u64 + 1;
                let want = (loads % nodes) * stride_elems;
                if u64::from(got) != want {
                    return Err(RunnerError::WrongResult(format!(
                        "cluster {c}: timed load {k} returned index {got}, the chain says {want}"
                    )));
                }
            }
            chases.push(ClusterChase {
                cluster: chaser.cluster,
                source_sm: chaser.sm,
                target_rank: *target_rank,
                target_sm,
                latencies: latencies[c * steps..(c + 1) * steps].to_vec(),
            });
        }
        if chases.len() != clusters {
            return Err(RunnerError::WrongResult(format!(
                "{} of {clusters} clusters reported a chase",
                chases.len()
            )));
        }
        Ok(ClusterChaseRun {
            placements: rows.into_iter().map(|(p, _)| p).collect(),
            chases,
            gpu_time,
        })
    }

    fn cluster_stream(
        &mut self,
        request: &ClusterStreamRequest,
    ) -> Result<ClusterStreamRun, RunnerError> {
        check_stream(request)?;
        let kernel = request.kernel();
        let shared = self.one_block_shared(u64::from(request.bytes))?;
        let function = self.cluster_function(kernel, shared, request.cluster_size)?;
        let blocks = (request.clusters * request.cluster_size) as usize;
        // Cycles (a `u64` per block), then the blocks' rows.
        let out = self.outputs.outputs(
            &[2 * blocks, blocks * CLUSTER_BLOCK_WORDS as usize],
            &self.stream,
        )?;
        let shape = ClusterShape {
            cluster_size: request.cluster_size,
            clusters: request.clusters,
            threads: request.threads,
            shared_bytes: shared,
        };
        let gpu_time = self.timed_cluster_launch(
            &function,
            shape,
            &[
                ("bytes", Arg::U32(request.bytes)),
                ("repeats", Arg::U32(request.repeats)),
                ("mode", Arg::U32(request.mode.word())),
                ("out_cycles", Arg::U64(out.ptr(0))),
                ("out_block", Arg::U64(out.ptr(1))),
            ],
        )?;
        let host_out = out.read()?;
        let rows = placements(host_out.u32s(1));
        let cycles = host_out.u64s(0);
        Ok(ClusterStreamRun {
            blocks: rows
                .into_iter()
                .zip(cycles)
                .map(|((p, _), c)| (p, c))
                .collect(),
            gpu_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_chain_is_one_cycle() {
        let chain = host_chain(4, 8);
        let mut j = 0usize;
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(j);
            j = chain[j] as usize;
        }
        assert_eq!(j, 0);
        assert_eq!(seen, [0, 8, 16, 24]);
    }

    #[test]
    fn rows_become_placements() {
        let rows = [5, 0, 0, 1, 9, 1, 0, u32::MAX];
        let parsed = placements(&rows);
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].0.sm, 9);
        assert_eq!(parsed[1].0.rank, 1);
        assert_eq!(parsed[0].1, 1);
    }
}
