//! Launch inputs and outputs in reused device buffers: each launch's outputs are regions
//! of one buffer, zeroed together on the stream and copied back in one copy; its small
//! inputs (node counts, SM lists) are regions of another, uploaded on the stream.
//!
//! Reuse is what keeps the host out of the way: a chase that allocated, zeroed, copied back
//! and freed three to six buffers of its own (`cuMemAlloc`, `cuMemsetD8`, `cuMemcpyDtoH`,
//! `cuMemFree` each), and its chain's init kernel one more, put about 200 ms of host time
//! between the launches of a default run on an H200.

use std::os::raw::c_void;

use super::{
    driver::check,
    ffi::{self, DevicePtr},
    handles::{DeviceBuffer, Stream},
};
use crate::error::RunnerError;

/// Regions start on 16-byte boundaries (four words), so that `u64` outputs are aligned.
const REGION_ALIGN_WORDS: usize = 4;

/// The smallest buffer allocated (256 KiB): most launches never grow it.
const MIN_WORDS: usize = 64 * 1024;

/// One reused device buffer, grown to the next power of two when a launch needs more.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    buffer: Option<DeviceBuffer<u32>>,
}

/// Where each region of a launch lies in the buffer, words.
#[derive(Debug, Clone)]
pub(super) struct Regions {
    base: DevicePtr,
    offsets: Vec<usize>,
    lens: Vec<usize>,
    words: usize,
}

/// The regions' contents, copied back.
#[derive(Debug)]
pub(super) struct HostRegions {
    words: Vec<u32>,
    offsets: Vec<usize>,
    lens: Vec<usize>,
}

/// The offsets of regions of `lens` words, each aligned, and the words they span.
fn layout(lens: &[usize]) -> (Vec<usize>, usize) {
    let mut offsets = Vec::with_capacity(lens.len());
    let mut end = 0;
    for &len in lens {
        offsets.push(end);
        end += len.div_ceil(REGION_ALIGN_WORDS) * REGION_ALIGN_WORDS;
    }
    (offsets, end.max(1))
}

impl Scratch {
    /// The buffer with room for `words`, reallocated (after `stream` finished with the old
    /// one) when too small.
    fn room(&mut self, words: usize, stream: &Stream) -> Result<DevicePtr, RunnerError> {
        if let Some(buffer) = self.buffer.as_ref().filter(|b| b.len() >= words) {
            return Ok(buffer.device_ptr());
        }
        stream.synchronize("cuStreamSynchronize (before growing a scratch buffer)")?;
        self.buffer = None;
        let buffer = DeviceBuffer::<u32>::uninitialized(words.next_power_of_two().max(MIN_WORDS))?;
        let ptr = buffer.device_ptr();
        self.buffer = Some(buffer);
        Ok(ptr)
    }

    /// Regions of `lens` words for a launch's outputs, zeroed on `stream` (one memset).
    pub(super) fn outputs(
        &mut self,
        lens: &[usize],
        stream: &Stream,
    ) -> Result<Regions, RunnerError> {
        let (offsets, words) = layout(lens);
        let base = self.room(words, stream)?;
        // SAFETY: the range lies inside the buffer just checked; ordered on the stream.
        check("cuMemsetD32Async", unsafe {
            ffi::cuMemsetD32Async(base, 0, words, stream.handle())
        })?;
        Ok(Regions {
            base,
            offsets,
            lens: lens.to_vec(),
            words,
        })
    }

    /// Uploads `values` on `stream` and returns their device address; valid until the next
    /// upload into this buffer (every launch is waited for before the next is prepared).
    pub(super) fn upload(
        &mut self,
        values: &[u32],
        stream: &Stream,
    ) -> Result<DevicePtr, RunnerError> {
        let base = self.room(values.len().max(1), stream)?;
        if !values.is_empty() {
            // SAFETY: the buffer holds `values.len()` words; the source outlives the call,
            // which stages pageable memory before it returns.
            check("cuMemcpyHtoDAsync", unsafe {
                ffi::cuMemcpyHtoDAsync(
                    base,
                    values.as_ptr().cast::<c_void>(),
                    4 * values.len(),
                    stream.handle(),
                )
            })?;
        }
        Ok(base)
    }
}

impl Regions {
    /// The device address of region `i`.
    pub(super) fn ptr(&self, i: usize) -> DevicePtr {
        self.base + 4 * self.offsets[i] as u64
    }

    /// Copies every region back (one synchronous copy; the stream must have finished).
    pub(super) fn read(&self) -> Result<HostRegions, RunnerError> {
        let mut words = vec![0u32; self.words];
        // SAFETY: the host vector has room for `words` values, the buffer holds them.
        check("cuMemcpyDtoH", unsafe {
            ffi::cuMemcpyDtoH(
                words.as_mut_ptr().cast::<c_void>(),
                self.base,
                4 * self.words,
            )
        })?;
        Ok(HostRegions {
            words,
            offsets: self.offsets.clone(),
            lens: self.lens.clone(),
        })
    }
}

impl HostRegions {
    /// Region `i` as words.
    pub(super) fn u32s(&self, i: usize) -> &[u32] {
        &self.words[self.offsets[i]..self.offsets[i] + self.lens[i]]
    }

    /// Region `i` as little-endian `u64`s (two words each).
    pub(super) fn u64s(&self, i: usize) -> Vec<u64> {
        self.u32s(i)
            .chunks_exact(2)
            .map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_and_do_not_overlap() {
        let (offsets, words) = layout(&[3, 8, 1, 0, 5]);
        assert_eq!(offsets, vec![0, 4, 12, 16, 16]);
        assert_eq!(words, 24);
        assert!(offsets.iter().all(|o| o % REGION_ALIGN_WORDS == 0));
        assert_eq!(layout(&[]).1, 1);
    }

    #[test]
    fn u64_regions_read_little_endian() {
        let host = HostRegions {
            words: vec![7, 0, 0, 0, 1, 2, 0xffff_ffff, 0],
            offsets: vec![0, 4],
            lens: vec![1, 4],
        };
        assert_eq!(host.u32s(0), &[7]);
        assert_eq!(host.u64s(1), vec![(2u64 << 32) | 1, 0xffff_ffff]);
    }
}
