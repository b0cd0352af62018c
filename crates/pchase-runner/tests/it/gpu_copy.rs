//! On a GPU: every copy path the device has runs at a small and a large size, one block and
//! many, and every block's last slot holds the source's word (the backend checks it); a
//! path the device lacks is a typed error. Without a GPU it says that it skipped.

#![cfg(feature = "cuda")]

use pchase_kernels::copy::CopyPath;
use pchase_runner::{
    measure::copy::{bandwidth_request, latency_request, max_copy_bytes},
    Backend, RunnerError,
};

use crate::gpu::gpu_or_skip;

#[test]
fn every_copy_path_lands_the_source_in_shared_memory() {
    let Some(mut gpu) = gpu_or_skip("every_copy_path_lands_the_source_in_shared_memory") else {
        return;
    };
    let device = gpu.device().clone();
    let cc = pchase_kernels::ComputeCapability::from(device.compute_capability);
    let max = max_copy_bytes(device.shared_per_block_optin_bytes);
    for path in CopyPath::ALL {
        let sizes: [(u32, Option<(u32, u32)>); 2] = if path == CopyPath::BulkTensor2d {
            [(256, Some((8, 8))), (65_536, Some((128, 128)))]
        } else {
            [(128, None), (max, None)]
        };
        for (bytes, tile) in sizes {
            for request in [
                latency_request(path, bytes, tile),
                bandwidth_request(path, bytes, tile, &device),
            ] {
                match gpu.copy(&request) {
                    Ok(run) => {
                        assert!(cc >= path.min_capability(), "{path} ran on {cc}");
                        assert_eq!(run.blocks.len(), request.grid as usize);
                        let rate = run.bytes_per_sm_cycle(&request).expect("a rate");
                        let p50 = {
                            let mut r = run.blocks[0].rounds.clone();
                            r.sort_unstable();
                            r[r.len() / 2]
                        };
                        eprintln!(
                            "{path} {bytes} B grid {} depth {}: round p50 {p50} cycles, {rate:.1} B/cycle/SM",
                            request.grid, request.depth
                        );
                        assert!(rate > 0.0 && p50 > 0);
                    }
                    Err(RunnerError::Unsupported { .. }) => {
                        assert!(cc < path.min_capability(), "{path} refused on {cc}");
                    }
                    Err(e) => panic!("{path} at {bytes} B: {e}"),
                }
            }
        }
    }
}
