//! The simulator's thread-block clusters: clusters placed inside GPCs, one block
//! per SM, distributed shared memory at the profile's latency and bandwidth.

use super::*;
use crate::cluster::{
    chaser_target, check_cluster_shape, check_stream, ClusterBackend, ClusterChase,
    ClusterChaseRequest, ClusterChaseRun, ClusterLimits, ClusterPlacement, ClusterStreamRequest,
    ClusterStreamRun, StreamMode, CLUSTER_SIZES,
};

impl SimBackend {
    fn cluster_spec(&self) -> Result<&ClusterSpec, RunnerError> {
        self.profile
            .clusters
            .as_ref()
            .ok_or_else(|| RunnerError::Unsupported {
                kernel: pchase_kernels::catalogue::dsmem_cluster_chase().entry(),
                needed: "9.0".into(),
                found: self.profile.device.compute_capability.to_string(),
            })
    }

    /// Places `clusters` clusters of `size` blocks, one block per SM, each cluster inside
    /// one GPC: GPCs in turn, each cluster on the lowest free SM ids of its GPC. The same
    /// launch lands on the same SMs every time, as on the H100 (two runs gave the same
    /// placement): SMs a size leaves over in a GPC stay out of every cluster of that size.
    fn place_clusters(
        &mut self,
        size: u32,
        clusters: u32,
    ) -> Result<Vec<ClusterPlacement>, RunnerError> {
        let spec = self.cluster_spec()?.clone();
        let active = spec.active_clusters(size);
        if clusters > active {
            return Err(RunnerError::InvalidRequest(format!(
                "{clusters} clusters of {size} blocks, one block per SM: at most {active} are resident at once"
            )));
        }
        let mut free: Vec<std::collections::VecDeque<u32>> =
            vec![Default::default(); spec.gpc_sms.len()];
        for (sm, g) in spec.sm_gpcs().iter().enumerate() {
            free[*g as usize].push_back(sm as u32);
        }
        let mut out = Vec::with_capacity((size * clusters) as usize);
        for cluster in 0..clusters {
            // The next GPC, in turn, with room for a whole cluster.
            let g = (0..free.len())
                .map(|i| (cluster as usize + i) % free.len())
                .find(|&g| free[g].len() >= size as usize)
                .ok_or_else(|| {
                    RunnerError::InvalidRequest(format!("no GPC has room for cluster {cluster}"))
                })?;
            for rank in 0..size {
                let sm = free[g].pop_front().expect("room checked above");
                out.push(ClusterPlacement {
                    block: cluster * size + rank,
                    sm,
                    rank,
                    cluster,
                });
            }
        }
        Ok(out)
    }
}

impl ClusterBackend for SimBackend {
    fn cluster_limits(&mut self, shared_bytes: u32) -> Result<ClusterLimits, RunnerError> {
        let spec = self.cluster_spec()?;
        if u64::from(shared_bytes) > self.profile.device.shared_per_block_optin_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "{shared_bytes} B of shared memory per block exceed the device's limit"
            )));
        }
        Ok(ClusterLimits {
            active_clusters: CLUSTER_SIZES
                .map(|s| (s, spec.active_clusters(s)))
                .collect(),
        })
    }

    fn cluster_chase(
        &mut self,
        request: &ClusterChaseRequest,
    ) -> Result<ClusterChaseRun, RunnerError> {
        check_cluster_shape(request.cluster_size, request.clusters)?;
        let spec = self.cluster_spec()?.clone();
        let needed = request
            .kernel()
            .dynamic_shared_bytes(request.steps, request.chain.elements() as u32)
            .map_err(|e| RunnerError::InvalidRequest(e.to_string()))?;
        if u64::from(needed) > self.profile.device.shared_per_block_optin_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "the chase needs {needed} B of shared memory per block"
            )));
        }
        self.kernels_used.insert(request.kernel().entry());
        self.count_launch();
        let placements = self.place_clusters(request.cluster_size, request.clusters)?;
        let overhead = i64::from(self.profile.clock.overhead_cycles);
        let noise = self.profile.noise;
        let jitter = self.jitter;
        let size = request.cluster_size as usize;
        let mut chases = Vec::with_capacity(request.clusters as usize);
        let mut longest = 0u64;
        for cluster in 0..request.clusters {
            let blocks = &placements[cluster as usize * size..(cluster as usize + 1) * size];
            let target_rank = chaser_target(cluster, request.target_offset, request.cluster_size);
            let source_sm = blocks[0].sm;
            let target_sm = blocks[target_rank as usize].sm;
            let base = if target_rank == 0 {
                spec.self_latency
            } else {
                spec.dsmem_latency
            };
            let latencies: Vec<u32> = (0..request.steps)
                .map(|_| {
                    let n = Self::noise(
                        &mut self.rng,
                        jitter.as_ref(),
                        noise.outlier_probability,
                        noise.outlier_extra_cycles,
                    );
                    (i64::from(base) + overhead + n).max(1) as u32
                })
                .collect();
            let cycles = u64::from(base)
                * (u64::from(request.steps) + u64::from(request.warmup_steps))
                + latencies.len() as u64 * overhead as u64;
            longest = longest.max(cycles);
            chases.push(ClusterChase {
                cluster,
                source_sm,
                target_rank,
                target_sm,
                latencies,
            });
        }
        let gpu_time = LAUNCH_OVERHEAD
            + Duration::from_secs_f64(longest as f64 / (self.profile.clock.sm_mhz * 1e6));
        Ok(ClusterChaseRun {
            placements,
            chases,
            gpu_time,
        })
    }

    fn cluster_stream(
        &mut self,
        request: &ClusterStreamRequest,
    ) -> Result<ClusterStreamRun, RunnerError> {
        check_stream(request)?;
        let spec = self.cluster_spec()?.clone();
        if u64::from(request.bytes) > self.profile.device.shared_per_block_optin_bytes {
            return Err(RunnerError::InvalidRequest(format!(
                "{} B per block exceed the device's shared memory per block",
                request.bytes
            )));
        }
        self.kernels_used.insert(request.kernel().entry());
        self.count_launch();
        let placements = self.place_clusters(request.cluster_size, request.clusters)?;
        let rate = match request.mode {
            // A cluster of one reads its own memory, whatever the mode says.
            _ if request.cluster_size == 1 => spec.local_bytes_per_cycle,
            StreamMode::RemoteRead => spec.read_bytes_per_cycle,
            StreamMode::RemoteWrite => spec.write_bytes_per_cycle,
            StreamMode::LocalRead => spec.local_bytes_per_cycle,
        };
        let ideal = request.bytes_per_block() as f64 / rate;
        let stdev = self.profile.noise.jitter_stdev_cycles;
        let blocks: Vec<(ClusterPlacement, u64)> = placements
            .into_iter()
            .map(|p| {
                // A fraction of a percent of spread between blocks, from the jitter.
                let spread = 1.0 + stdev * 1e-3 * self.rng.random::<f64>();
                (p, (ideal * spread).round().max(1.0) as u64)
            })
            .collect();
        let longest = blocks.iter().map(|(_, c)| *c).max().unwrap_or(0);
        let gpu_time = LAUNCH_OVERHEAD
            + Duration::from_secs_f64(longest as f64 / (self.profile.clock.sm_mhz * 1e6));
        Ok(ClusterStreamRun { blocks, gpu_time })
    }
}
