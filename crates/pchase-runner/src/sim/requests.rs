//! The requests the simulated GPU answers: the [`Backend`] methods.

use super::*;

impl Backend for SimBackend {
    fn device(&self) -> &DeviceInfo {
        &self.profile.device
    }

    fn bandwidth(
        &mut self,
        request: &crate::bandwidth::BandwidthRequest,
    ) -> Result<crate::bandwidth::BandwidthRun, RunnerError> {
        self.run_bandwidth(request)
    }

    fn chase(&mut self, request: &ChaseRequest) -> Result<ChaseRun, RunnerError> {
        let shared_bytes = self.check_request(request)?;
        self.kernels_used.insert(request.kernel().entry());
        let path = request.path;

        let mut cursors = chain_cursors(path, &request.chains);
        let mut blocks = self.start_launch(request.chains.len(), shared_bytes);
        // The launch starts with a cold L2 (a flush); a written chain then has the first
        // `written_bytes` of every node in it.
        if request.written_bytes > 0 {
            for cursor in &cursors {
                let stride = 4 * cursor.stride_elements;
                for node in 0..cursor.span_elements / cursor.stride_elements.max(1) {
                    self.l2.write(
                        cursor.base + node * stride,
                        u64::from(request.written_bytes),
                        &mut self.rng,
                    );
                }
            }
        }
        // A chase is thread 0 of every block: copy 0 of every cache.
        let route = self.route(path, 0);
        if path == LoadPath::Shared {
            // The block copies its chain into shared memory first: one load per element.
            let far = u64::from(self.profile.l2.far());
            for (block, cursor) in blocks.iter_mut().zip(&cursors) {
                block.cycles += cursor.span_elements * far;
            }
        }
        let timing = match request.mode {
            ChaseMode::Fine => Timing::Fine,
            ChaseMode::Coarse => Timing::Coarse,
        };
        self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            timing,
        )?;

        let gpu_time = self.gpu_time(&blocks);
        let overhead = u64::from(self.profile.clock.overhead_cycles);
        let out = blocks
            .into_iter()
            .zip(&cursors)
            .map(|(mut block, cursor)| {
                block.samples.final_index = cursor.index_u32();
                if timing == Timing::Coarse {
                    // The timed pass of the coarse kernel is bracketed by one pair of clock
                    // reads: its total is the sum of its loads plus that one overhead.
                    block.samples.total_cycles = Some(block.timed_cycles + overhead);
                }
                block.samples
            })
            .collect();
        Ok(ChaseRun {
            blocks: out,
            gpu_time,
        })
    }

    fn list_chase(
        &mut self,
        request: &crate::backend::ListChaseRequest,
    ) -> Result<ChaseRun, RunnerError> {
        crate::backend::check_list_chase(request)?;
        // The launch's shared memory as the fine chase of the span would ask for it.
        let words = u64::from(request.line_bytes / 4);
        let first = request.lines.iter().copied().min().unwrap_or(0);
        let last = request.lines.iter().copied().max().unwrap_or(0);
        let span = ChainSpec::new((last - first + 1) * 4 * words, request.line_bytes)?;
        let as_chase = ChaseRequest {
            steps: request.steps,
            warmup_steps: request.warmup_steps,
            carveout: request.carveout,
            ..ChaseRequest::fine(request.path, span, request.steps)
        };
        let shared_bytes = self.check_request(&as_chase)?;
        self.kernels_used.insert(as_chase.kernel().entry());
        let elements: std::sync::Arc<[u64]> =
            request.lines.iter().map(|&l| (l - first) * words).collect();
        // Line L at L × line_bytes from the allocation's start, as on the GPU.
        let base = GLOBAL_BASE + first * u64::from(request.line_bytes);
        let mut cursors = [ChainCursor::listed(base, elements)];
        let mut blocks = self.start_launch(1, shared_bytes);
        let route = self.route(request.path, 0);
        self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            Timing::Fine,
        )?;
        Ok(self.fine_run(blocks, &cursors))
    }

    fn two_phase(&mut self, request: &TwoPhaseRequest) -> Result<ChaseRun, RunnerError> {
        let shared_bytes = self.check_two_phase_request(request)?;
        self.kernels_used.insert(request.kernel()?.entry());
        let (mut chain_a, mut chain_b) = Self::two_phase_cursors(request);
        let mut blocks = self.start_launch(request.blocks as usize, shared_bytes);
        // Each phase's thread reaches the caches through its own warp's copies. A
        // block-filled request (`block_fill`: whole passes, `.cg`) is simulated as its
        // phases' threads chasing: the same lines in the same (address) order.
        let fill = self.route(request.fill.path, request.fill.thread);
        let evict = self.route(request.evict.path, request.evict.thread);
        let mut launch = self.launch();
        // The kernel's barriers separate the phases: every block finishes one before any
        // starts the next.
        launch.run_phase(
            &mut blocks,
            &mut chain_a,
            &fill,
            request.fill.steps,
            Timing::Untimed,
        )?;
        launch.run_phase(
            &mut blocks,
            &mut chain_b,
            &evict,
            request.evict.steps,
            Timing::Untimed,
        )?;
        launch.run_phase(
            &mut blocks,
            &mut chain_a,
            &fill,
            request.timed_steps,
            Timing::Fine,
        )?;
        Ok(self.fine_run(blocks, &chain_a))
    }

    fn instruction_fetch(
        &mut self,
        request: &crate::icache::InstructionFetchRequest,
    ) -> Result<crate::icache::InstructionFetchRun, RunnerError> {
        self.run_instruction_fetch(request)
    }

    fn probe(
        &mut self,
        launch: &crate::backend::ProbeLaunch,
        model: &dyn crate::backend::ProbeModel,
    ) -> Result<crate::backend::ProbeRun, RunnerError> {
        self.run_probe(launch, model)
    }

    fn pinned_chase(&mut self, request: &PinnedRequest) -> Result<PinnedRun, RunnerError> {
        check_pinned(request, self.profile.device.sm_count)?;
        self.kernels_used.insert(request.kernel()?.entry());
        for chain in &request.chains {
            check_chain(chain)?;
        }
        let shared_bytes = self.profile.shared_carveout_for(Carveout::Percent(0), 0)?;
        let slots = request.sms.len();
        // Chases of every slot: warps × chases per warp (each warp's first thread runs its
        // chases side by side, one load of each per step).
        let chases = usize::try_from(request.chases_per_slot()).unwrap_or(usize::MAX);
        let per_warp = request.chains_per_warp.max(1) as usize;
        // One state per chase of every slot, chase-major: the first `slots` are the chases 0
        // (warp 0's first), and chase `c` belongs to warp `c / per_warp`.
        let bases = chain_cursors(LoadPath::GlobalCg, &request.chains);
        let mut cursors = Vec::with_capacity(slots * chases);
        let mut sms = Vec::with_capacity(slots * chases);
        for chase in 0..chases {
            for ((base, chain), &sm) in bases.iter().zip(&request.chains).zip(&request.sms) {
                let mut cursor = base.clone();
                cursor.index = request.start_node(chain, chase as u32) * cursor.stride_elements;
                cursors.push(cursor);
                sms.push(sm as usize);
            }
        }
        // Every slot is reached and starts with the others: the simulated SMs are all free.
        let mut blocks = self.start_launch_on(&sms, shared_bytes);
        let route = self.route(LoadPath::GlobalCg, 0);
        // The kernel's barriers: every warp warms up, then every warp runs its timed pass,
        // then the first thread of warp 0 samples loads one by one.
        self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            Timing::Coarse,
        )?;
        // The samples are not part of the timed passes. Where the profile limits the loads
        // in flight, every warp's pass queues by the same factor (`sim/mlp.rs`).
        let factor = self.profile.mlp.map_or(1.0, |m| {
            m.factor(
                u32::try_from(chases).unwrap_or(u32::MAX),
                u32::try_from(slots).unwrap_or(u32::MAX),
            )
        });
        // A warp's pass lasts as long as its chases' (side by side): their mean, per slot.
        let timed: Vec<u64> = (0..slots * chases / per_warp)
            .map(|i| {
                let (warp, slot) = (i / slots, i % slots);
                let sum: u64 = (0..per_warp)
                    .map(|k| blocks[(warp * per_warp + k) * slots + slot].timed_cycles)
                    .sum();
                (sum as f64 / per_warp as f64 * factor).round() as u64
            })
            .collect();
        // Warp 0 samples while the other warps go on chasing, one load each in turn.
        let (first, rest) = blocks.split_at_mut(slots);
        let (first_cursors, rest_cursors) = cursors.split_at_mut(slots);
        let mut launch = self.launch();
        for _ in 0..request.sample_steps {
            launch.run_phase(first, first_cursors, &route, 1, Timing::Fine)?;
            launch.run_phase(rest, rest_cursors, &route, 1, Timing::Untimed)?;
        }
        let gpu_time = self.gpu_time(&blocks);
        let overhead = u64::from(self.profile.clock.overhead_cycles);
        let mut out: Vec<Option<PinnedSlot>> = (0..slots)
            .map(|i| {
                Some(PinnedSlot {
                    sm: blocks[i].samples.smid,
                    total_cycles: 0,
                    final_index: cursors[i].index_u32(),
                    together: true,
                    samples: std::mem::take(&mut blocks[i].samples.latencies),
                })
            })
            .collect();
        for (i, cycles) in timed.iter().enumerate() {
            if let Some(slot) = out[i % slots].as_mut() {
                // Each warp's timed pass is bracketed by its own pair of clock reads.
                slot.total_cycles += cycles + overhead;
            }
        }
        Ok(PinnedRun {
            slots: out,
            gpu_time,
        })
    }

    fn partition_map(
        &mut self,
        request: &PartitionMapRequest,
    ) -> Result<PartitionMapRun, RunnerError> {
        let sm_count = self.profile.device.sm_count;
        check_partition_map(request, sm_count)?;
        self.kernels_used
            .insert(pchase_kernels::catalogue::l2_partition_map().entry());
        let shared_bytes = self.profile.shared_carveout_for(Carveout::Percent(0), 0)?;
        let lines = request.lines_per_sm;
        let chain = ChainSpec::new(
            u64::from(lines) * u64::from(request.line_bytes),
            request.line_bytes,
        )?;
        // One buffer: SM `s`'s array is the `s`-th run of `lines` lines.
        let cursors: Vec<ChainCursor> = (0..u64::from(sm_count))
            .map(|s| ChainCursor::new(GLOBAL_BASE + s * chain.bytes, &chain))
            .collect();
        let sms: Vec<usize> = (0..sm_count as usize).collect();
        let mut blocks = self.start_launch_on(&sms, shared_bytes);
        let route = self.route(LoadPath::GlobalCg, 0);
        let reference = request.reference_sm as usize;
        let mut launch = self.launch();
        // The reference loads every array once, then the SMs take turns: each reads its own
        // array twice, every load timed.
        for cursor in &cursors {
            let mut warming = cursor.clone();
            launch.run_phase(
                std::slice::from_mut(&mut blocks[reference]),
                std::slice::from_mut(&mut warming),
                &route,
                lines,
                Timing::Untimed,
            )?;
        }
        let mut seen = Vec::with_capacity(sms.len());
        for sm in 0..sms.len() {
            let mut cursor = cursors[sm].clone();
            let block = &mut blocks[sm];
            let before = block.samples.latencies.len();
            launch.run_phase(
                std::slice::from_mut(block),
                std::slice::from_mut(&mut cursor),
                &route,
                2 * lines,
                Timing::Fine,
            )?;
            let mut cold = block.samples.latencies.split_off(before);
            let warm = cold.split_off(lines as usize);
            seen.push(Some(SmLineLatencies { cold, warm }));
        }
        // The SMs take turns: the launch lasts as long as all their loads together.
        let cycles: u64 = blocks.iter().map(|b| b.cycles).sum();
        let gpu_time = LAUNCH_OVERHEAD
            + Duration::from_secs_f64(cycles as f64 / (self.profile.clock.sm_mhz * 1e6));
        Ok(PartitionMapRun {
            sms: seen,
            base_address: GLOBAL_BASE,
            array_stride: chain.bytes,
            gpu_time,
        })
    }

    fn clock_overhead(&mut self, samples: u32) -> Result<u32, RunnerError> {
        if samples == 0 {
            return Err(RunnerError::InvalidRequest(
                "clock overhead needs at least one sample".into(),
            ));
        }
        self.count_launch();
        let overhead = i64::from(self.profile.clock.overhead_cycles);
        let jitter = self.jitter;
        let noise = self.profile.noise;
        let mut readings: Vec<i64> = (0..samples)
            .map(|_| {
                (overhead
                    + Self::noise(
                        &mut self.rng,
                        jitter.as_ref(),
                        noise.outlier_probability,
                        noise.outlier_extra_cycles,
                    ))
                .max(0)
            })
            .collect();
        let middle = readings.len() / 2;
        let (_, median, _) = readings.select_nth_unstable(middle);
        Ok(u32::try_from(*median).unwrap_or(u32::MAX))
    }

    fn copy(
        &mut self,
        request: &crate::copy::CopyRequest,
    ) -> Result<crate::copy::CopyRun, RunnerError> {
        self.run_copy(request)
    }

    fn walks(&mut self) -> Option<&mut dyn crate::walk::WalkBackend> {
        Some(self)
    }

    fn host(&mut self) -> Option<&mut dyn crate::host::HostBackend> {
        if self.profile.host_link.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn clusters(&mut self) -> Option<&mut dyn crate::cluster::ClusterBackend> {
        if self.profile.clusters.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn measure_sm_clock_mhz(&mut self) -> Result<f64, RunnerError> {
        self.count_launch();
        let mhz = self.observe().sm_clock_mhz;
        let normal = Normal::new(mhz, mhz * CLOCK_MEASUREMENT_STDEV)
            .map_err(|e| RunnerError::Profile(format!("clock.sm_mhz: {e}")))?;
        Ok(normal.sample(&mut self.rng))
    }
}
