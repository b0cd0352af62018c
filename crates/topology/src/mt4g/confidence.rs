//! The `confidence` of every value the MT4G export writes, and the compute keys MT4G reads
//! from the API that memtopo's results may lack.
//!
//! MT4G gives each benchmarked size a confidence in `[0, 1]` (its change-point score; 0 when
//! it could not bracket the value, and values under 0.5 are not used further). memtopo
//! keeps the statistic its own test produced, so the export maps that statistic onto the
//! same scale ([`confidence()`]).

use crate::model::ComputeCapability;
use crate::quantity::{Provenance, Size, SizeBound};

/// The confidence the MT4G export writes for `size`, in `[0, 1]`:
///
/// | what memtopo holds | confidence |
/// | --- | --- |
/// | a value the driver reported (`provenance: api`) | 1 |
/// | only a bound (`at_least`, `at_most`, `between`) | 0, as MT4G marks a size it cannot bracket |
/// | `evidence.confidence` (a detector's own confidence, or the share of observations that agreed) | that value |
/// | `evidence.p_value` of the test that the change is real | 1 − p |
/// | no statistic recorded (results written before memtopo kept one for this quantity) | 0 |
///
/// ```
/// use topology::{mt4g, Bytes, ChangePointEvidence, Provenance, Size};
/// let api = Size::api(Bytes(52_428_800));
/// assert_eq!(mt4g::confidence(&api), 1.0);
/// let tested = Size::measured(Bytes(246_784), ChangePointEvidence { p_value: Some(1e-9), ..Default::default() });
/// assert_eq!(mt4g::confidence(&tested), 1.0 - 1e-9);
/// let bound = Size::at_least(Bytes(65_536), Provenance::Benchmark);
/// assert_eq!(mt4g::confidence(&bound), 0.0);
/// ```
pub fn confidence(size: &Size) -> f64 {
    if size.provenance == Provenance::Api {
        return 1.0;
    }
    if !matches!(size.bound, SizeBound::Exact(_)) {
        return 0.0;
    }
    let Some(evidence) = &size.evidence else {
        return 0.0;
    };
    let value = evidence
        .confidence
        .or(evidence.p_value.map(|p| 1.0 - p))
        .unwrap_or(0.0);
    if value.is_finite() {
        value.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// FP32 lanes per SM of a compute capability, as MT4G derives `numberOfCoresPerMultiProcessor`
/// (no API reports it): the CUDA C++ Programming Guide's table of arithmetic throughput.
pub(crate) fn cores_per_sm(cc: ComputeCapability) -> Option<u32> {
    Some(match (cc.major, cc.minor) {
        (3, _) => 192,
        (5, _) => 128,
        (6, 0) => 64,
        (6, 1 | 2) => 128,
        (7, 0 | 2 | 5) => 64,
        (8, 0) => 64,
        (8, 6 | 7 | 9) => 128,
        (9, 0) => 128,
        _ => return None,
    })
}

/// Resident blocks per SM of a compute capability (`cudaDevAttrMaxBlocksPerMultiprocessor`),
/// from the CUDA C++ Programming Guide's table of technical specifications.
pub(crate) fn max_blocks_per_sm(cc: ComputeCapability) -> Option<u32> {
    Some(match (cc.major, cc.minor) {
        (3, _) => 16,
        (5 | 6, _) => 32,
        (7, 0 | 2) => 32,
        (7, 5) => 16,
        (8, 0) => 32,
        (8, 6 | 7) => 16,
        (8, 9) => 24,
        (9, 0) => 32,
        _ => return None,
    })
}
