//! What the export sets, and what it leaves to the base.

/// One option memtopo sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The option, e.g. `-gpgpu_l1_latency`.
    pub option: String,
    /// Its value as GPGPU-Sim reads it.
    pub value: String,
    /// The measurement or driver value it came from, in words.
    pub source: String,
}

/// An option memtopo would set but cannot: a comment with what is known and what is
/// missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unset {
    /// The option.
    pub option: String,
    /// What memtopo measured of it and what it needs from a base.
    pub reason: String,
}

/// What the export sets and what it leaves to the base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The options set, in the order they are written.
    pub set: Vec<Setting>,
    /// The options left to the base, with why.
    pub unset: Vec<Unset>,
    /// Checks of the base against the measurement, written as comments.
    pub notes: Vec<String>,
}

impl Settings {
    pub(super) fn set(&mut self, option: &str, value: impl ToString, source: impl Into<String>) {
        self.set.push(Setting {
            option: option.into(),
            value: value.to_string(),
            source: source.into(),
        });
    }

    pub(super) fn unset(&mut self, option: &str, reason: impl Into<String>) {
        self.unset.push(Unset {
            option: option.into(),
            reason: reason.into(),
        });
    }

    /// The value set for `option`, if any.
    pub fn value(&self, option: &str) -> Option<&str> {
        self.set
            .iter()
            .find(|s| s.option == option)
            .map(|s| s.value.as_str())
    }
}
