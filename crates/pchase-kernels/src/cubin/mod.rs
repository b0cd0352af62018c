//! Machine code of every module for the GPUs memtopo ships it for: one cubin per module and
//! architecture of [`ARCHITECTURES`], assembled from the committed PTX by a pinned `ptxas`
//! (`cargo xtask cubin`), committed under `ptx/cubin/` as gzip members and embedded here.
//!
//! A runner loads a module's cubin when the device's compute capability is exactly one it
//! was assembled for ([`Module::cubin`]); the driver then compiles nothing. Any other GPU (a
//! newer one, or a minor revision not listed) gets the PTX, JIT-compiled by the driver as
//! before. The exact match is deliberate: a cubin for sm_80 would run on an sm_86 GPU, but
//! the driver's JIT would schedule the timed loops for sm_86, and memtopo measures what the
//! GPU's own code does (docs/ptx.md, "Machine code").
//!
//! ```
//! use pchase_kernels::{catalogue, cubin, ComputeCapability};
//!
//! let pchase = catalogue::pchase_module();
//! let h100 = pchase.cubin(ComputeCapability::SM_90).expect("sm_90 is listed");
//! assert_eq!(h100.capability(), ComputeCapability::SM_90);
//! let image = h100.image()?;
//! assert_eq!(&image[..4], b"\x7fELF");
//! assert_eq!(image.len(), h100.len());
//! // No cubin for a minor revision that is not listed, nor for a GPU newer than the list.
//! assert!(pchase.cubin(ComputeCapability::new(5, 3)).is_none());
//! assert!(pchase.cubin(ComputeCapability::new(13, 0)).is_none());
//! assert!(cubin::ARCHITECTURES.contains(&ComputeCapability::new(8, 6)));
//! # Ok::<(), pchase_kernels::Error>(())
//! ```

/// One entry of the generated table: the module, the architecture's two numbers, the
/// image's length, the CRC-32 of its PTX; the file is `ptx/cubin/<module>.sm_<XY>.cubin.gz`.
macro_rules! cubin {
    ($module:literal, $major:literal, $minor:literal, $len:literal, $crc:literal) => {
        $crate::cubin::Cubin::new(
            $module,
            $crate::ComputeCapability::new($major, $minor),
            $len,
            $crc,
            include_bytes!(concat!(
                "../../../../ptx/cubin/",
                $module,
                ".sm_",
                $major,
                $minor,
                ".cubin.gz"
            )),
        )
    };
}

mod table;

use std::io::Read;
use std::sync::OnceLock;

use crate::{ComputeCapability, Error, Module};

/// The compute capabilities memtopo ships cubins for, oldest first: the exact architecture
/// of every current NVIDIA GPU family the pinned `ptxas` can assemble for and whose driver
/// can load its cubins. Left out: sm_53, sm_62 and sm_72 (the Jetson TX1/Nano, TX2 and
/// Xavier boards, whose newest drivers are CUDA 10.2 or 11.4 and cannot load a CUDA 12.9
/// cubin) and sm_101 (renamed sm_110 by CUDA 13, so no current driver reports it); those
/// GPUs, and any newer than sm_121, JIT-compile the PTX.
pub const ARCHITECTURES: [ComputeCapability; 15] = [
    // Maxwell: GTX 750, Tesla M10 / GTX 900, Tesla M40, M60.
    ComputeCapability::new(5, 0),
    ComputeCapability::new(5, 2),
    // Pascal: P100 / GTX 10 series, P4, P40.
    ComputeCapability::new(6, 0),
    ComputeCapability::new(6, 1),
    // Volta: V100. Turing: T4, RTX 20 series.
    ComputeCapability::new(7, 0),
    ComputeCapability::new(7, 5),
    // Ampere: A100, A30 / A10, A40, RTX 30 series / Jetson Orin. Ada: L4, L40, RTX 40 series.
    ComputeCapability::new(8, 0),
    ComputeCapability::new(8, 6),
    ComputeCapability::new(8, 7),
    ComputeCapability::new(8, 9),
    // Hopper: H100, H200, GH200.
    ComputeCapability::new(9, 0),
    // Blackwell: B200, GB200 / B300, GB300 / RTX 50 series, RTX PRO 6000 / GB10.
    ComputeCapability::new(10, 0),
    ComputeCapability::new(10, 3),
    ComputeCapability::new(12, 0),
    ComputeCapability::new(12, 1),
];

/// The `ptxas` release that assembled every embedded cubin (`ptxas --version`).
pub const PTXAS_RELEASE: &str = table::PTXAS_RELEASE;

/// One module's machine code for one architecture, embedded gzip-compressed.
#[derive(Debug)]
pub struct Cubin {
    module: &'static str,
    capability: ComputeCapability,
    len: usize,
    ptx_crc32: u32,
    compressed: &'static [u8],
    image: OnceLock<Vec<u8>>,
}

impl Cubin {
    /// An entry of the generated table.
    pub(crate) const fn new(
        module: &'static str,
        capability: ComputeCapability,
        len: usize,
        ptx_crc32: u32,
        compressed: &'static [u8],
    ) -> Cubin {
        Cubin {
            module,
            capability,
            len,
            ptx_crc32,
            compressed,
            image: OnceLock::new(),
        }
    }

    /// The name of the module it is the code of.
    pub fn module_name(&self) -> &'static str {
        self.module
    }

    /// The compute capability it was assembled for (`ptxas -arch=sm_XY`); only a device of
    /// exactly this capability is given it.
    pub fn capability(&self) -> ComputeCapability {
        self.capability
    }

    /// Bytes of the ELF image.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the image is empty (never, for a cubin of the table).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes embedded in the binary (the gzip member).
    pub fn compressed_len(&self) -> usize {
        self.compressed.len()
    }

    /// CRC-32 of the PTX text it was assembled from: a test compares it with the embedded
    /// PTX, so that a template changed without `cargo xtask cubin` fails the tests.
    pub fn ptx_crc32(&self) -> u32 {
        self.ptx_crc32
    }

    /// The ELF image, ready for `cuModuleLoadData`: decompressed on first use and kept for
    /// the life of the process (every GPU of a run shares it).
    ///
    /// # Errors
    /// [`Error::CorruptCubin`] when the embedded data does not decompress to the recorded
    /// length (a damaged build).
    pub fn image(&'static self) -> Result<&'static [u8], Error> {
        if let Some(image) = self.image.get() {
            return Ok(image);
        }
        let corrupt = |reason: String| Error::CorruptCubin {
            module: self.module,
            capability: self.capability,
            reason,
        };
        let mut image = Vec::with_capacity(self.len);
        flate2::read::GzDecoder::new(self.compressed)
            .read_to_end(&mut image)
            .map_err(|e| corrupt(e.to_string()))?;
        if image.len() != self.len {
            return Err(corrupt(format!(
                "{} bytes after decompression, the table records {}",
                image.len(),
                self.len
            )));
        }
        Ok(self.image.get_or_init(|| image))
    }
}

/// Every embedded cubin, by module (catalogue order) then architecture.
pub fn all() -> &'static [Cubin] {
    &table::CUBINS
}

/// Segments of the `icache` module's cubins: the size the instruction-cache benchmark
/// loads ([`crate::icache::BENCHMARK_SEGMENTS`] when the table is current).
pub const ICACHE_SEGMENTS: u32 = table::ICACHE_SEGMENTS;

impl Module {
    /// The module's cubin for a device of compute capability `device`: only an exact match
    /// (`None` for any capability not in [`ARCHITECTURES`], or below the module's minimum).
    ///
    /// For `icache` it is the code of [`ICACHE_SEGMENTS`] segments, the size the benchmark
    /// loads, not of the small instance [`Module::ptx`] holds; [`crate::icache::cubin`]
    /// asks by size.
    pub fn cubin(&'static self, device: ComputeCapability) -> Option<&'static Cubin> {
        table::CUBINS
            .iter()
            .find(|c| c.module == self.name && c.capability == device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NOT_GZIP: Cubin = Cubin::new("pchase", ComputeCapability::SM_90, 8, 0, b"not gzip");
    // A gzip member of the 3 bytes "abc", recorded as 4.
    static SHORT: Cubin = Cubin::new(
        "pchase",
        ComputeCapability::SM_90,
        4,
        0,
        &[
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x4b, 0x4c, 0x4a, 0x06,
            0x00, 0xc2, 0x41, 0x24, 0x35, 0x03, 0x00, 0x00, 0x00,
        ],
    );

    #[test]
    fn a_damaged_cubin_is_a_typed_error() {
        let err = NOT_GZIP.image().expect_err("not gzip");
        assert!(matches!(
            err,
            Error::CorruptCubin {
                module: "pchase",
                ..
            }
        ));
        assert!(err
            .to_string()
            .starts_with("the embedded sm_90 cubin of module `pchase` is damaged"));
        let err = SHORT.image().expect_err("short");
        assert!(
            err.to_string()
                .ends_with("3 bytes after decompression, the table records 4"),
            "{err}"
        );
    }
}
