//! Physical units: byte counts, cycle counts, clock frequencies and time.
//!
//! The newtypes make it impossible to add a size to a latency or to read a
//! latency in cycles as nanoseconds: a [`Cycles`] value only becomes
//! [`Nanoseconds`] through a [`Megahertz`] clock, normally the SM clock that
//! was measured while the benchmark ran.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A size in bytes.
///
/// Serialised as a plain integer; the surrounding quantity names its unit.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// `n` KiB (1024 bytes each).
    pub const fn kib(n: u64) -> Self {
        Bytes(n * 1024)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        Bytes(n * 1024 * 1024)
    }

    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        Bytes(n * 1024 * 1024 * 1024)
    }

    /// The number of bytes.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Bytes {
    /// Human-readable binary units: `128 B`, `64 KiB`, `22.254 KiB`, `50 MiB`.
    ///
    /// Up to three decimals, trailing zeros dropped, as in the thesis tables.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            return write!(f, "{} B", self.0);
        }
        let text = format!("{value:.3}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        write!(f, "{text} {}", UNITS[unit])
    }
}

/// A duration counted in SM clock cycles (may be fractional: a mean).
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Cycles(pub f64);

impl Cycles {
    /// The number of cycles.
    pub const fn get(self) -> f64 {
        self.0
    }

    /// This many cycles at `clock`, in nanoseconds.
    ///
    /// ```
    /// use topology::{Cycles, Megahertz};
    /// let ns = Cycles(200.0).to_nanoseconds(Megahertz(2000.0));
    /// assert!((ns.get() - 100.0).abs() < 1e-9);
    /// ```
    pub fn to_nanoseconds(self, clock: Megahertz) -> Nanoseconds {
        // cycles / (MHz · 1e6 / s) · 1e9 ns/s = cycles · 1000 / MHz
        Nanoseconds(self.0 * 1000.0 / clock.0)
    }
}

impl fmt::Display for Cycles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} cy", self.0)
    }
}

/// A duration in nanoseconds, always derived from [`Cycles`] and a clock.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Nanoseconds(pub f64);

impl Nanoseconds {
    /// The number of nanoseconds.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl fmt::Display for Nanoseconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} ns", self.0)
    }
}

/// A clock frequency in MHz.
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct Megahertz(pub f64);

impl Megahertz {
    /// The frequency in MHz.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl fmt::Display for Megahertz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.0} MHz", self.0)
    }
}

/// Defines a zero-sized marker that serialises as one fixed unit string and
/// refuses any other on load, so every quantity in a file names its unit and a
/// file that says `"unit": "ms"` where cycles are meant is rejected.
macro_rules! unit_marker {
    ($(#[$doc:meta])* $name:ident, $text:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name;

        impl $name {
            /// The unit as written in files.
            pub const TEXT: &'static str = $text;
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($text)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                if text == $text {
                    Ok($name)
                } else {
                    Err(serde::de::Error::custom(format!(
                        "unit must be \"{}\", found \"{}\"",
                        $text, text
                    )))
                }
            }
        }

        impl JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "const": $text })
            }
        }
    };
}

unit_marker!(
    /// The unit tag `"B"` (bytes).
    ByteUnit,
    "B"
);
unit_marker!(
    /// The unit tag `"cycles"` (SM clock cycles).
    CycleUnit,
    "cycles"
);
unit_marker!(
    /// The unit tag `"GiB/s"`.
    GibPerSecondUnit,
    "GiB/s"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_display_uses_binary_units_with_three_decimals() {
        assert_eq!(Bytes(128).to_string(), "128 B");
        assert_eq!(Bytes::kib(64).to_string(), "64 KiB");
        assert_eq!(Bytes(22788).to_string(), "22.254 KiB");
        assert_eq!(Bytes::mib(50).to_string(), "50 MiB");
        assert_eq!(Bytes(1536 * 1024).to_string(), "1.5 MiB");
    }

    #[test]
    fn unit_marker_rejects_other_units() {
        let err = serde_json::from_str::<CycleUnit>("\"ns\"").unwrap_err();
        assert!(err.to_string().contains("unit must be \"cycles\""), "{err}");
        assert!(serde_json::from_str::<CycleUnit>("\"cycles\"").is_ok());
    }
}
