//! The simulated GPU's TLB walks ([`crate::walk`]): a region at the allocator's base whose
//! pages are the profile's `tlb.page_bytes` when plain and `min(page_bytes, chunk_bytes)`
//! when built of chunks (separately mapped or aliased; an aliased region may span more
//! addresses than the memory: the model translates addresses and keeps only the walk's
//! lines); each walk is one block's fine-grained chase through it.

use super::*;
use crate::walk::{
    aliased_pool_chunks, WalkAllocation, WalkBackend, WalkRegion, WalkRequest, WalkRun,
    ALIASED_CHUNK_BYTES, CHUNKED_POOL_CHUNKS, LINE_BYTES,
};

impl WalkBackend for SimBackend {
    fn walk_region(
        &mut self,
        allocation: WalkAllocation,
        max_bytes: u64,
    ) -> Result<WalkRegion, RunnerError> {
        self.walk_region = None;
        let chunk = self.profile.tlb.as_ref().map_or(2 << 20, |t| t.chunk_bytes);
        let memory = self.profile.device.total_memory_bytes;
        let (chunk_bytes, mut bytes, backing_bytes) = match allocation {
            WalkAllocation::Plain => (None, max_bytes.min(memory), None),
            // A pool of chunks over the places, as the GPU's.
            WalkAllocation::Chunked => {
                let places = max_bytes.min(memory) / chunk;
                let pool = places.min(CHUNKED_POOL_CHUNKS);
                let backing = (pool < places).then_some(pool * chunk);
                (Some(chunk), max_bytes.min(memory), backing)
            }
            // More addresses than memory: the simulated pool is what the GPU's would be.
            WalkAllocation::Aliased => (
                Some(ALIASED_CHUNK_BYTES),
                max_bytes,
                Some(ALIASED_CHUNK_BYTES * aliased_pool_chunks(memory)),
            ),
        };
        bytes -= bytes % chunk_bytes.unwrap_or(LINE_BYTES);
        if bytes < chunk_bytes.unwrap_or(2 * LINE_BYTES) {
            return Err(RunnerError::InvalidRequest(format!(
                "a {allocation} walk region of {max_bytes} B holds no chunk"
            )));
        }
        let sm_count = self.sms.len();
        let tlbs = self
            .profile
            .tlb
            .as_ref()
            .map(|spec| Tlbs::new(spec, sm_count, spec.page_for(allocation)));
        let region = WalkRegion {
            allocation,
            bytes,
            chunk_bytes,
            backing_bytes,
        };
        self.walk_region = Some((region, tlbs));
        Ok(region)
    }

    fn walk(&mut self, request: &WalkRequest) -> Result<WalkRun, RunnerError> {
        let Some((region, _)) = &self.walk_region else {
            return Err(RunnerError::InvalidRequest(
                "a walk needs a walk region first".into(),
            ));
        };
        request.check(region.bytes)?;
        self.kernels_used.insert(request.kernel()?.entry());
        let shared = self
            .profile
            .shared_carveout_for(Carveout::Percent(0), 8 * u64::from(request.steps))?;
        let mut blocks = self.start_launch(1, shared);
        // The walk's loads are translated by the region's TLBs, emptied as a launch's are.
        if let Some((_, walk_tlbs)) = &mut self.walk_region {
            std::mem::swap(&mut self.tlbs, walk_tlbs);
        }
        if let Some(tlbs) = &mut self.tlbs {
            tlbs.reset();
        }
        let route = self.route(request.path, 0);
        let mut cursors = [ChainCursor {
            base: GLOBAL_BASE,
            index: 0,
            stride_elements: request.step_bytes / 4,
            span_elements: request.span_bytes() / 4,
            grouped: (request.group > 1).then_some(GroupedOrder {
                nodes: u64::from(request.nodes),
                group: u64::from(request.group),
                position: 0,
            }),
            listed: None,
        }];
        let result = self.launch().warm_then_time(
            &mut blocks,
            &mut cursors,
            &route,
            [request.warmup_steps, request.steps],
            Timing::Fine,
        );
        if let Some((_, walk_tlbs)) = &mut self.walk_region {
            std::mem::swap(&mut self.tlbs, walk_tlbs);
        }
        result?;
        let gpu_time = self.gpu_time(&blocks);
        let block = blocks.into_iter().next().ok_or_else(|| {
            RunnerError::WrongResult("simulator: a walk launched no block".into())
        })?;
        Ok(WalkRun {
            smid: block.samples.smid,
            latencies: block.samples.latencies,
            gpu_time,
        })
    }

    fn release_walk_region(&mut self) -> Result<(), RunnerError> {
        self.walk_region = None;
        Ok(())
    }
}
