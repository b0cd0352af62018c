//! `cpd` turns series of measurements into change points.
//!
//! It is a general, pure-Rust change-point library (it knows nothing about
//! GPUs): segment costs ([`L2Cost`], [`L1Cost`], [`NormalCost`], [`RankCost`],
//! [`RbfCost`], or your own [`SegmentCost`]), exact searches
//! ([`single_change_point`], [`dynp`], [`pelt`]) and greedy [`binseg`],
//! penalties ([`Penalty`]), reductions of multivariate samples
//! ([`GeometricMapping`], [`mean_reduction`]) and two-sample
//! Kolmogorov–Smirnov tests ([`ks_2samp`], [`ks_critical_value`],
//! [`ks_max_split_permutation_test`]).
//!
//! Univariate series are slices; multivariate signals are `ndarray` arrays
//! whose rows are time points and whose columns are dimensions. Change points
//! are exclusive segment ends, as in ruptures: a change at `t` means samples
//! `..t` and `t..` differ, and a [`Segmentation`]'s ends finish with `n`.
//!
//! # The thesis' cache-size decision
//!
//! Rows are array sizes, columns the repeated latency samples at that size: map
//! the rows to one series, find the single best change point, and confirm it
//! with a Kolmogorov–Smirnov test of the samples on either side.
//!
//! ```
//! use cpd::{ks_2samp, GeometricMapping, SearchOptions};
//! use ndarray::Array2;
//!
//! // 12 sizes × 8 samples: latency ~ 30 cycles below size 7, ~ 200 above.
//! let samples = Array2::from_shape_fn((12, 8), |(size, sample)| {
//!     let base = if size < 7 { 30.0 } else { 200.0 };
//!     base + ((size * 8 + sample) % 5) as f64
//! });
//! let split = GeometricMapping::default().single_change_point(samples.view(), SearchOptions::default())?;
//! let change = split.distance.change_point;
//! assert_eq!(change, 7);
//!
//! let left: Vec<f64> = samples.slice(ndarray::s![..change, ..]).iter().copied().collect();
//! let right: Vec<f64> = samples.slice(ndarray::s![change.., ..]).iter().copied().collect();
//! let test = ks_2samp(&left, &right)?;
//! assert!(test.rejects_at(0.01));
//! assert!(test.exceeds_critical_value(0.01));
//! # Ok::<(), cpd::CpdError>(())
//! ```
//!
//! # Several change points in a latency curve
//!
//! ```
//! use cpd::{dynp, pelt, L2Cost, Penalty, SearchOptions};
//!
//! // A pseudo-random noise in (−1, 1).
//! let noise = |i: usize| ((i as f64 * 12.9898).sin() * 43758.5453).fract();
//! let latency: Vec<f64> = (0..60)
//!     .map(|i| match i { 0..=19 => 30.0, 20..=39 => 90.0, _ => 400.0 } + noise(i))
//!     .collect();
//! let cost = L2Cost::from_series(&latency)?;
//! let two = dynp(&cost, 2, SearchOptions::default())?;
//! assert_eq!(two.change_points(), &[20, 40]);
//!
//! // The noise is uniform on (−1, 1), of variance 1/3; with measured data,
//! // `cpd::estimate_noise_variance` estimates it.
//! let penalty = Penalty::Mbic.per_change_point(latency.len(), 1, 1.0 / 3.0)?;
//! let free = pelt(&cost, penalty, SearchOptions::new(5, 1))?;
//! assert_eq!(free.change_points(), &[20, 40]);
//! # Ok::<(), cpd::CpdError>(())
//! ```
#![deny(missing_docs)]

pub mod cost;
mod error;
pub mod ks;
mod penalty;
mod reduce;
pub mod search;
mod signal;

pub use cost::{
    segment_costs, sum_of_costs, CostSweep, Gamma, L1Cost, L2Cost, NormalCost, RankCost, RbfCost,
    SegmentCost,
};
pub use error::{CpdError, Result};
pub use ks::{
    ks_2samp, ks_asymptotic_p_value, ks_critical_value, ks_exact_p_value,
    ks_max_split_permutation_test, ks_statistic, ExactInfeasible, KsTest, MaxSplitKsTest,
    PValueMethod,
};
/// The `ndarray` this crate's API takes and returns (`Array2`, `ArrayView2`, …), so that
/// callers use the same version without depending on it themselves.
pub use ndarray;
pub use penalty::{estimate_noise_variance, Penalty};
pub use reduce::{
    mean_reduction, GeometricMapping, GeometricSegmentation, GeometricSeries, GeometricSingleChange,
};
pub use search::{
    binseg, dynp, pelt, single_change_point, single_change_point_l2, BinsegStop, SearchOptions,
    Segmentation, SingleChangePoint,
};
pub use signal::series_to_signal;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExample;
