//! The memory paths a pointer-chase load can take, and what a chase kernel's chain
//! argument is for each.

use std::fmt;

/// The memory path a pointer-chase load goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoadPath {
    /// `ld.global.ca.u32`: cache at all levels (L1 data cache where the GPU caches global loads).
    GlobalCa,
    /// `ld.global.cg.u32`: cache in L2 only.
    GlobalCg,
    /// `ld.global.nc.u32`: the non-coherent read-only data path.
    GlobalNc,
    /// `tex.1d.v4.u32.s32` on a texture object: the texture cache.
    Texture,
    /// `ld.const.u32` on the module's `.const` array: the constant caches.
    Constant,
    /// `ld.shared.u32` on a copy of the chain in dynamic shared memory.
    Shared,
}

impl LoadPath {
    /// Every load path, in catalogue order.
    pub const ALL: [LoadPath; 6] = [
        LoadPath::GlobalCa,
        LoadPath::GlobalCg,
        LoadPath::GlobalNc,
        LoadPath::Texture,
        LoadPath::Constant,
        LoadPath::Shared,
    ];

    /// The snake-case name used in entry names (`global_ca`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LoadPath::GlobalCa => "global_ca",
            LoadPath::GlobalCg => "global_cg",
            LoadPath::GlobalNc => "global_nc",
            LoadPath::Texture => "texture",
            LoadPath::Constant => "constant",
            LoadPath::Shared => "shared",
        }
    }

    /// What the `chain` parameter of this path's chase kernels (`chase_<path>`,
    /// `chase_fine_<path>`) holds.
    ///
    /// The two-phase kernels ([`catalogue::two_phase`](crate::catalogue::two_phase)) differ on
    /// the Constant path: there `chain_a` / `chain_b` is the chain's element offset inside
    /// [`catalogue::constant_chain`](crate::catalogue::constant_chain), not unused.
    pub fn chain_argument(self) -> ChainArgument {
        match self {
            LoadPath::GlobalCa | LoadPath::GlobalCg | LoadPath::GlobalNc | LoadPath::Shared => {
                ChainArgument::DevicePointer
            }
            LoadPath::Texture => ChainArgument::TextureObject,
            LoadPath::Constant => ChainArgument::Unused,
        }
    }
}

impl fmt::Display for LoadPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a chase kernel's `chain` parameter must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainArgument {
    /// A device pointer to the `u32` chain in global memory.
    DevicePointer,
    /// A `CUtexObject` over the chain (linear resource, `u32` elements, point filtering,
    /// unnormalised coordinates).
    TextureObject,
    /// Ignored (pass 0): the chain lives in the module global
    /// [`catalogue::constant_chain`](crate::catalogue::constant_chain).
    Unused,
}
