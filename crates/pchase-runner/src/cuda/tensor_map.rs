//! `cuTensorMapEncodeTiled` (CUDA 12.0), which cust 0.3.2's bindings lack: looked up through
//! `cuGetProcAddress` like the cluster launches, declared with the driver's integer enums.
//! It writes the 128-byte tensor map the 2-D bulk copy reads (passed to the kernel by value).

use std::{ffi::c_void, os::raw::c_int};

use super::{cluster_driver::proc_address, driver::check, ffi::CuResult};
use crate::error::RunnerError;

/// `CU_TENSOR_MAP_DATA_TYPE_UINT32`.
const DATA_TYPE_UINT32: c_int = 2;
/// `CU_TENSOR_MAP_INTERLEAVE_NONE`, `CU_TENSOR_MAP_SWIZZLE_NONE`,
/// `CU_TENSOR_MAP_L2_PROMOTION_NONE`, `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`.
const NONE: c_int = 0;

type EncodeTiled = unsafe extern "C" fn(
    map: *mut [u64; 16],
    data_type: c_int,
    rank: u32,
    global: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    box_dim: *const u32,
    element_strides: *const u32,
    interleave: c_int,
    swizzle: c_int,
    l2_promotion: c_int,
    oob_fill: c_int,
) -> CuResult;

/// A row-major 2-D tensor of `u32` at `global`: `width × height` elements, rows `4 × width`
/// bytes apart, read in `box_w × box_h` boxes, no swizzle, no interleave, no L2 promotion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiled2d {
    /// Device address of element (0, 0); 16-byte aligned.
    pub global: u64,
    /// Elements per row.
    pub width: u64,
    /// Rows.
    pub height: u64,
    /// Box width in elements (at most 256, `4 × box_w` a multiple of 16).
    pub box_w: u32,
    /// Box height in elements (at most 256).
    pub box_h: u32,
}

impl Tiled2d {
    /// The driver's arguments: dimensions, the row stride in bytes, the box, element strides.
    fn arguments(&self) -> ([u64; 2], [u64; 1], [u32; 2], [u32; 2]) {
        (
            [self.width, self.height],
            [4 * self.width],
            [self.box_w, self.box_h],
            [1, 1],
        )
    }

    /// Encodes the tensor map.
    ///
    /// # Errors
    /// [`RunnerError::Cuda`] when the driver lacks the call (before CUDA 12.0) or refuses
    /// the shape.
    pub fn encode(&self) -> Result<[u64; 16], RunnerError> {
        let pfn = proc_address("cuTensorMapEncodeTiled")?;
        // SAFETY: the driver's cuTensorMapEncodeTiled has this signature (CUDA 12.0).
        let encode: EncodeTiled = unsafe { std::mem::transmute(pfn) };
        let (dims, strides, boxes, element_strides) = self.arguments();
        let mut map = [0u64; 16];
        // SAFETY: every array outlives the call and has the rank's length (strides rank − 1);
        // the map is 128 bytes, as CUtensorMap.
        check("cuTensorMapEncodeTiled", unsafe {
            encode(
                &mut map,
                DATA_TYPE_UINT32,
                2,
                self.global as *mut c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                element_strides.as_ptr(),
                NONE,
                NONE,
                NONE,
                NONE,
            )
        })?;
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_stride_is_in_bytes_and_the_map_has_cutensormaps_size() {
        let t = Tiled2d {
            global: 0x1000,
            width: 8192,
            height: 64,
            box_w: 32,
            box_h: 16,
        };
        let (dims, strides, boxes, elements) = t.arguments();
        assert_eq!(dims, [8192, 64]);
        assert_eq!(strides, [32_768]);
        assert_eq!(boxes, [32, 16]);
        assert_eq!(elements, [1, 1]);
        assert_eq!(std::mem::size_of::<[u64; 16]>(), 128);
    }
}
