//! The typed errors every fallible `cpd` function returns.

use thiserror::Error;

/// Why a change-point computation refused its input.
///
/// Every check happens before any arithmetic, so a returned number is never the
/// silent product of bad input.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum CpdError {
    /// The series or sample set has no values at all.
    #[error("the {what} is empty")]
    Empty {
        /// Which input was empty (for example "series" or "left sample").
        what: &'static str,
    },
    /// The series is too short to hold the requested segments.
    #[error("the series has {len} samples but at least {needed} are needed")]
    TooShort {
        /// Number of samples supplied.
        len: usize,
        /// Number of samples the request needs.
        needed: usize,
    },
    /// A value is NaN or infinite.
    #[error("non-finite value {value} at row {row}, column {column}")]
    NonFinite {
        /// Row (time index) of the offending value.
        row: usize,
        /// Column (dimension) of the offending value.
        column: usize,
        /// The offending value itself.
        value: f64,
    },
    /// Two inputs that must agree in size do not.
    #[error("dimension mismatch: expected {expected} {what}, found {found}")]
    DimensionMismatch {
        /// What was counted (for example "columns").
        what: &'static str,
        /// The size that was expected.
        expected: usize,
        /// The size that was found.
        found: usize,
    },
    /// More change points were requested than the series can hold.
    #[error("{requested} change points requested but at most {max} fit the series")]
    TooManyChangePoints {
        /// Number of change points requested.
        requested: usize,
        /// Largest number that fits with the given `min_size` and `jump`.
        max: usize,
    },
    /// The series shows no noise to estimate: constant apart from at most a tenth of its
    /// steps.
    #[error("the series of {len} values has no noise to estimate: it is constant apart from its largest steps")]
    NoNoise {
        /// Number of values.
        len: usize,
    },
    /// A penalty that is zero, negative or not finite.
    #[error("invalid penalty {value}: {reason}")]
    InvalidPenalty {
        /// The penalty value.
        value: f64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// Any other parameter outside its domain.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// Name of the parameter.
        name: &'static str,
        /// Why it is rejected.
        reason: String,
    },
    /// Finite values too large for the cost: an intermediate sum overflows a
    /// double (for example the sum of squares of the L2 cost, beyond about
    /// 1e154 per value), so every cost would be infinite or NaN.
    #[error("the {what} overflows a double: the values are too large for this cost")]
    Overflow {
        /// Which sum overflows.
        what: &'static str,
    },
    /// A column has zero spread, so scaling by its spread is impossible.
    #[error("column {column} has zero median absolute deviation of its differences")]
    ZeroSpread {
        /// The column with zero spread.
        column: usize,
    },
}

/// Shorthand for results whose error is [`CpdError`].
pub type Result<T> = std::result::Result<T, CpdError>;
