//! A cache's organisation: sets, ways, how addresses pick a set, and the replacement
//! policy (schema 1.6 fills what 1.0 reserved).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::{Count, Size};
use crate::units::Bytes;

/// A cache replacement policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplacementPolicy {
    /// Least recently used.
    Lru,
    /// First in, first out.
    Fifo,
    /// Random.
    Random,
    /// A policy that starts missing before the cache is full (Volta+ L1).
    EarlyEviction,
    /// Tree pseudo-LRU (added in schema 1.6).
    TreePlru,
    /// Anything else, described.
    Other(String),
}

impl fmt::Display for ReplacementPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplacementPolicy::Lru => f.write_str("LRU"),
            ReplacementPolicy::Fifo => f.write_str("FIFO"),
            ReplacementPolicy::Random => f.write_str("random"),
            ReplacementPolicy::EarlyEviction => f.write_str("early eviction"),
            ReplacementPolicy::TreePlru => f.write_str("tree PLRU"),
            ReplacementPolicy::Other(text) => f.write_str(text),
        }
    }
}

/// How addresses pick a cache set (added in schema 1.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SetMapping {
    /// The line number modulo the number of sets: lines `set_stride` bytes apart share a
    /// set.
    Modulo {
        /// Bytes between two lines of one set (sets × line).
        set_stride: Bytes,
        /// Where the sets are a power of two: the address bits `[low, high)` that index them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address_bits: Option<[u32; 2]>,
    },
    /// Not a modulo of the line number: a hash of the address, with what was seen.
    Hashed {
        /// The evidence, in words.
        description: String,
    },
}

impl fmt::Display for SetMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetMapping::Modulo {
                set_stride,
                address_bits: Some([low, high]),
            } => write!(
                f,
                "set = address bits {low}–{} (lines {set_stride} apart share a set)",
                high.saturating_sub(1)
            ),
            SetMapping::Modulo { set_stride, .. } => {
                write!(
                    f,
                    "set = line number mod sets (lines {set_stride} apart share a set)"
                )
            }
            SetMapping::Hashed { description } => write!(f, "hashed set index: {description}"),
        }
    }
}

/// The organisation of a cache: sets, ways, the set mapping and the replacement policy
/// (measured since schema 1.6 by the `sets` benchmark; `associativity`, `sets` and
/// `replacement` were reserved since 1.0).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CacheGeometry {
    /// Ways per set (that keep reused lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub associativity: Option<Count>,
    /// The number of sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sets: Option<Count>,
    /// The replacement policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<ReplacementPolicy>,
    /// The capacity the geometry was measured at (1.6): sets × ways × line. The L1's
    /// depends on the shared-memory configuration, so it may differ from the element's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// The line the sets are counted in (1.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_size: Option<Size>,
    /// How addresses pick a set (1.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_mapping: Option<SetMapping>,
    /// The observations behind the values, in words (1.6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// What could not be determined, and why (1.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_determined: Option<String>,
}

impl CacheGeometry {
    /// One line for reports: sets × ways × line = size, the mapping, the replacement, and
    /// what is not determined.
    ///
    /// ```
    /// use topology::*;
    /// let g = CacheGeometry {
    ///     sets: Some(Count::new(8, Provenance::Benchmark)),
    ///     associativity: Some(Count::new(4, Provenance::Benchmark)),
    ///     replacement: Some(ReplacementPolicy::Lru),
    ///     ..CacheGeometry::default()
    /// };
    /// assert_eq!(g.summary(), "8 sets × 4 ways; replacement LRU");
    /// ```
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        match (self.sets, self.associativity) {
            (Some(sets), Some(ways)) => {
                let mut text = format!("{} sets × {} ways", sets.value, ways.value);
                if let Some(line) = &self.line_size {
                    text.push_str(&format!(" × {line}"));
                }
                if let Some(size) = &self.size {
                    text.push_str(&format!(" = {size}"));
                }
                parts.push(text);
            }
            (None, Some(ways)) => parts.push(format!("{} ways", ways.value)),
            (Some(sets), None) => parts.push(format!("{} sets", sets.value)),
            (None, None) => {}
        }
        if let Some(mapping) = &self.set_mapping {
            parts.push(mapping.to_string());
        }
        if let Some(policy) = &self.replacement {
            parts.push(format!("replacement {policy}"));
        }
        if let Some(why) = &self.not_determined {
            parts.push(format!("not determined: {why}"));
        }
        parts.join("; ")
    }
}
