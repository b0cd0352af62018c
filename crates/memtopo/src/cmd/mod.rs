//! The subcommands that work on saved results; none of them needs a GPU or the CUDA
//! driver. `measure` is [`crate::run`].

pub mod diff;
pub mod export;
pub mod merge;
pub mod render;
pub mod validate;
