//! Integration tests of the kernel catalogue against the embedded PTX text.

mod bandwidth;

mod catalogue;
mod copy;
mod cubin;
mod entries;
mod features;
mod headers;
mod ptx_text;
mod timing_order;
mod two_phase;
