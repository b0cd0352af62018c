//! Safe wrappers over the raw driver calls of [`super::ffi`]: modules with their JIT log,
//! kernel launches with arguments checked against the catalogue, texture objects and
//! device attributes.

use std::{
    ffi::{c_void, CString},
    os::raw::c_int,
    ptr,
};

use pchase_kernels::{Kernel, ParamType};

use super::errors;
use super::ffi::{self, CuResult, DevicePtr, FunctionHandle, ModuleHandle, StreamHandle};
use crate::error::RunnerError;

/// Turns a driver result into the runner's error.
pub fn check(call: &'static str, code: CuResult) -> Result<(), RunnerError> {
    if code == ffi::SUCCESS {
        Ok(())
    } else {
        Err(RunnerError::Cuda {
            call,
            message: errors::describe(code),
        })
    }
}

/// One device attribute, by its raw `CU_DEVICE_ATTRIBUTE_*` number.
pub fn device_attribute(device: c_int, attribute: c_int) -> Result<i32, RunnerError> {
    let mut value = 0;
    // SAFETY: the out-pointer is valid; unknown attributes are reported as an error code.
    check("cuDeviceGetAttribute", unsafe {
        ffi::cuDeviceGetAttribute(&mut value, attribute, device)
    })?;
    Ok(value)
}

/// The driver's version, e.g. 13000 for CUDA 13.0.
pub fn driver_version() -> Result<u32, RunnerError> {
    let mut version = 0;
    // SAFETY: the out-pointer is valid.
    check("cuDriverGetVersion", unsafe {
        ffi::cuDriverGetVersion(&mut version)
    })?;
    Ok(u32::try_from(version).unwrap_or(0))
}

/// A loaded module (from PTX or a cubin); unloaded on drop. Valid while its context is
/// current.
#[derive(Debug)]
pub struct LoadedModule {
    handle: ModuleHandle,
    name: &'static str,
}

impl LoadedModule {
    /// JIT-compiles `ptx`; on failure the error carries the JIT compiler's log.
    pub fn load(name: &'static str, ptx: &str) -> Result<LoadedModule, RunnerError> {
        let image = CString::new(ptx).map_err(|_| RunnerError::ModuleLoad {
            module: name,
            reason: "the PTX text contains a NUL byte".into(),
            log: String::new(),
        })?;
        // SAFETY: a NUL-terminated PTX text, alive for the call.
        unsafe { Self::load_image(name, image.as_ptr().cast()) }
    }

    /// Loads machine code: `cubin` is an ELF image for this GPU's architecture, which the
    /// driver loads without compiling. The driver checks the image and refuses one for
    /// another architecture (`CUDA_ERROR_NO_BINARY_FOR_GPU`) or one it cannot read.
    pub fn load_cubin(name: &'static str, cubin: &[u8]) -> Result<LoadedModule, RunnerError> {
        const ELF_MAGIC: &[u8] = b"\x7fELF";
        if !cubin.starts_with(ELF_MAGIC) {
            return Err(RunnerError::ModuleLoad {
                module: name,
                reason: "the cubin is no ELF image".into(),
                log: String::new(),
            });
        }
        // SAFETY: an ELF image (the driver reads its length from the headers), alive for
        // the call.
        unsafe { Self::load_image(name, cubin.as_ptr().cast()) }
    }

    /// `cuModuleLoadDataEx` of a PTX text or a cubin, with the JIT's logs.
    ///
    /// # Safety
    /// `image` points to a NUL-terminated PTX text or a complete ELF image that stays
    /// valid for the call.
    unsafe fn load_image(
        name: &'static str,
        image: *const c_void,
    ) -> Result<LoadedModule, RunnerError> {
        const LOG_BYTES: usize = 16 * 1024;
        let mut error_log = vec![0u8; LOG_BYTES];
        let mut info_log = vec![0u8; LOG_BYTES];
        let mut options = [
            ffi::JIT_ERROR_LOG_BUFFER,
            ffi::JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            ffi::JIT_INFO_LOG_BUFFER,
            ffi::JIT_INFO_LOG_BUFFER_SIZE_BYTES,
        ];
        // cuModuleLoadDataEx takes values that fit a pointer by value, cast to void*.
        let mut values: [*mut c_void; 4] = [
            error_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            info_log.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
        ];
        let mut handle: ModuleHandle = ptr::null_mut();
        // SAFETY: the caller vouches for the image; the log buffers outlive the call and
        // their sizes are passed alongside.
        let code = unsafe {
            ffi::cuModuleLoadDataEx(
                &mut handle,
                image,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let text = |buf: &[u8]| {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            String::from_utf8_lossy(&buf[..end]).trim().to_string()
        };
        if code != ffi::SUCCESS {
            return Err(RunnerError::ModuleLoad {
                module: name,
                reason: errors::describe(code),
                log: text(&error_log),
            });
        }
        let info = text(&info_log);
        if !info.is_empty() {
            log::debug!("JIT log of module {name}: {info}");
        }
        Ok(LoadedModule { handle, name })
    }

    /// The catalogue name of the module.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Looks up a kernel of this module.
    pub fn function(&self, kernel: &'static Kernel) -> Result<LoadedFunction, RunnerError> {
        let entry = CString::new(kernel.entry()).expect("catalogue entry names have no NUL");
        let mut handle: FunctionHandle = ptr::null_mut();
        // SAFETY: valid module handle and NUL-terminated name.
        check("cuModuleGetFunction", unsafe {
            ffi::cuModuleGetFunction(&mut handle, self.handle, entry.as_ptr())
        })?;
        Ok(LoadedFunction { handle, kernel })
    }

    /// Address and size of a module-scope variable.
    pub fn global(&self, symbol: &str) -> Result<(DevicePtr, usize), RunnerError> {
        let symbol = CString::new(symbol).expect("symbol names have no NUL");
        let mut ptr = 0;
        let mut bytes = 0;
        // SAFETY: valid module handle, NUL-terminated name, valid out-pointers.
        check("cuModuleGetGlobal", unsafe {
            ffi::cuModuleGetGlobal(&mut ptr, &mut bytes, self.handle, symbol.as_ptr())
        })?;
        Ok((ptr, bytes))
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // SAFETY: the handle came from cuModuleLoadDataEx and is unloaded once.
        let code = unsafe { ffi::cuModuleUnload(self.handle) };
        if code != ffi::SUCCESS {
            log::warn!(
                "unloading module {} failed: {}",
                self.name,
                errors::describe(code)
            );
        }
    }
}

/// A kernel argument, typed as the catalogue declares parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    /// A `.u32` parameter.
    U32(u32),
    /// A `.u64` parameter (pointers and texture objects too).
    U64(u64),
    /// A 128-byte `CUtensorMap` passed by value (`ParamType::TensorMap`).
    TensorMap([u64; 16]),
}

/// A kernel of a loaded module.
#[derive(Debug, Clone, Copy)]
pub struct LoadedFunction {
    handle: FunctionHandle,
    kernel: &'static Kernel,
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy)]
pub struct LaunchShape {
    /// Blocks in x and y.
    pub grid: (u32, u32),
    /// Threads per block.
    pub threads: u32,
    /// Dynamic shared memory in bytes.
    pub shared_bytes: u32,
}

impl LoadedFunction {
    /// Sets a function attribute by its raw number.
    pub fn set_attribute(&self, attribute: c_int, value: i32) -> Result<(), RunnerError> {
        // SAFETY: valid function handle; the driver validates attribute and value.
        check("cuFuncSetAttribute", unsafe {
            ffi::cuFuncSetAttribute(self.handle, attribute, value)
        })
    }

    /// The raw handle, for launches this wrapper does not make (`cuLaunchKernelEx`).
    pub fn handle(&self) -> FunctionHandle {
        self.handle
    }

    /// Launches with `args` given by parameter name; every catalogue parameter must be
    /// given exactly once with its declared type.
    pub fn launch(
        &self,
        stream: StreamHandle,
        shape: LaunchShape,
        args: &[(&str, Arg)],
    ) -> Result<(), RunnerError> {
        let mut ordered = self.ordered(args)?;
        let mut pointers = arg_pointers(&mut ordered);
        // SAFETY: each pointer refers to a value of the type the PTX declares, in order,
        // and outlives the call (the driver copies parameters at launch).
        check("cuLaunchKernel", unsafe {
            ffi::cuLaunchKernel(
                self.handle,
                shape.grid.0,
                shape.grid.1,
                1,
                shape.threads,
                1,
                1,
                shape.shared_bytes,
                stream,
                pointers.as_mut_ptr(),
                ptr::null_mut(),
            )
        })
    }

    /// `args` in the catalogue's parameter order; every parameter must be given exactly once
    /// with its declared type, and no other.
    pub fn ordered(&self, args: &[(&str, Arg)]) -> Result<Vec<Arg>, RunnerError> {
        let params = self.kernel.params();
        let mut ordered: Vec<Arg> = Vec::with_capacity(params.len());
        for param in params {
            let mut matches = args.iter().filter(|(name, _)| *name == param.name());
            let (_, arg) = matches.next().ok_or_else(|| {
                RunnerError::InvalidRequest(format!(
                    "kernel {} launched without parameter `{}`",
                    self.kernel.entry(),
                    param.name()
                ))
            })?;
            if matches.next().is_some() {
                return Err(RunnerError::InvalidRequest(format!(
                    "kernel {} given parameter `{}` twice",
                    self.kernel.entry(),
                    param.name()
                )));
            }
            let type_ok = matches!(
                (param.ty(), arg),
                (ParamType::U32, Arg::U32(_))
                    | (ParamType::U64, Arg::U64(_))
                    | (ParamType::TensorMap, Arg::TensorMap(_))
            );
            if !type_ok {
                return Err(RunnerError::InvalidRequest(format!(
                    "kernel {} parameter `{}` is {:?}, given {:?}",
                    self.kernel.entry(),
                    param.name(),
                    param.ty(),
                    arg
                )));
            }
            ordered.push(*arg);
        }
        if let Some((name, _)) = args
            .iter()
            .find(|(name, _)| !params.iter().any(|p| p.name() == *name))
        {
            return Err(RunnerError::InvalidRequest(format!(
                "kernel {} has no parameter `{name}`",
                self.kernel.entry()
            )));
        }
        Ok(ordered)
    }
}

/// The `kernelParams` array of a launch: one pointer to each argument, valid while
/// `ordered` lives and is not moved.
pub fn arg_pointers(ordered: &mut [Arg]) -> Vec<*mut c_void> {
    ordered
        .iter_mut()
        .map(|arg| match arg {
            Arg::U32(v) => (v as *mut u32).cast(),
            Arg::U64(v) => (v as *mut u64).cast(),
            Arg::TensorMap(map) => map.as_mut_ptr().cast(),
        })
        .collect()
}

/// A texture object over linear device memory of 32-bit unsigned integers.
#[derive(Debug)]
pub struct LinearTexture {
    handle: u64,
}

impl LinearTexture {
    /// Creates the texture object over `bytes` at `ptr`, read as raw `u32` elements.
    pub fn new(ptr: DevicePtr, bytes: usize) -> Result<LinearTexture, RunnerError> {
        let resource = ffi::ResourceDescLinear {
            res_type: ffi::RESOURCE_TYPE_LINEAR,
            _pad0: 0,
            dev_ptr: ptr,
            format: ffi::AD_FORMAT_UNSIGNED_INT32,
            num_channels: 1,
            size_in_bytes: bytes,
            _reserved: [0; 104],
            flags: 0,
            _pad1: 0,
        };
        let desc = ffi::TextureDesc {
            flags: ffi::TRSF_READ_AS_INTEGER,
            ..ffi::TextureDesc::default()
        };
        let mut handle = 0;
        // SAFETY: the descriptors have the driver's layout (checked by the size test) and
        // live across the call; no resource view.
        check("cuTexObjectCreate", unsafe {
            ffi::cuTexObjectCreate(&mut handle, &resource, &desc, ptr::null())
        })?;
        Ok(LinearTexture { handle })
    }

    /// The object to pass to the kernel.
    pub fn handle(&self) -> u64 {
        self.handle
    }
}

impl Drop for LinearTexture {
    fn drop(&mut self) {
        // SAFETY: created by cuTexObjectCreate, destroyed once.
        let code = unsafe { ffi::cuTexObjectDestroy(self.handle) };
        if code != ffi::SUCCESS {
            log::warn!(
                "destroying a texture object failed: {}",
                errors::describe(code)
            );
        }
    }
}

/// Device-to-device copy.
pub fn copy_device_to_device(
    dst: DevicePtr,
    src: DevicePtr,
    bytes: usize,
) -> Result<(), RunnerError> {
    // SAFETY: the caller passes ranges inside live allocations of the current context.
    check("cuMemcpyDtoD", unsafe {
        ffi::cuMemcpyDtoD(dst, src, bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::ffi::{ResourceDescLinear, TextureDesc};

    #[test]
    fn enum_values_match_the_bindings() {
        use cust::sys::{CUarray_format, CUresourcetype};
        assert_eq!(
            super::ffi::RESOURCE_TYPE_LINEAR,
            CUresourcetype::CU_RESOURCE_TYPE_LINEAR as i32
        );
        assert_eq!(
            super::ffi::AD_FORMAT_UNSIGNED_INT32,
            CUarray_format::CU_AD_FORMAT_UNSIGNED_INT32 as i32
        );
        assert_eq!(
            super::ffi::TRSF_READ_AS_INTEGER,
            cust::sys::CU_TRSF_READ_AS_INTEGER
        );
    }

    #[test]
    fn descriptors_have_the_driver_layout() {
        // sizeof(CUDA_RESOURCE_DESC) and sizeof(CUDA_TEXTURE_DESC) in cuda.h.
        assert_eq!(std::mem::size_of::<ResourceDescLinear>(), 144);
        assert_eq!(std::mem::size_of::<TextureDesc>(), 104);
        assert_eq!(
            std::mem::size_of::<ResourceDescLinear>(),
            std::mem::size_of::<cust::sys::CUDA_RESOURCE_DESC>()
        );
        assert_eq!(
            std::mem::size_of::<TextureDesc>(),
            std::mem::size_of::<cust::sys::CUDA_TEXTURE_DESC>()
        );
    }
}
