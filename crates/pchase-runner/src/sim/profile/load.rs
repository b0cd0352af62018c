//! Profiles in and out of TOML, and the profiles bundled with the crate.

use std::path::Path;

use crate::error::RunnerError;

use super::*;

/// Bundled profiles: name and TOML text (the files in `examples/profiles/`).
const BUNDLED: &[(&str, &str)] = &[
    (
        "kepler",
        include_str!("../../../../../examples/profiles/kepler.toml"),
    ),
    (
        "maxwell",
        include_str!("../../../../../examples/profiles/maxwell.toml"),
    ),
    (
        "volta",
        include_str!("../../../../../examples/profiles/volta.toml"),
    ),
    (
        "h100",
        include_str!("../../../../../examples/profiles/h100.toml"),
    ),
    (
        "h200",
        include_str!("../../../../../examples/profiles/h200.toml"),
    ),
];

impl SimProfile {
    /// Names of the bundled profiles, for [`SimProfile::bundled`].
    pub fn bundled_names() -> impl Iterator<Item = &'static str> {
        BUNDLED.iter().map(|(name, _)| *name)
    }

    /// A profile shipped in `examples/profiles/` by name (`kepler`, `maxwell`, `volta`,
    /// `h100`, `h200`).
    ///
    /// # Errors
    /// [`RunnerError::Profile`] for an unknown name (the message lists the known ones).
    pub fn bundled(name: &str) -> Result<SimProfile, RunnerError> {
        let text = BUNDLED
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, text)| *text)
            .ok_or_else(|| {
                let known: Vec<&str> = SimProfile::bundled_names().collect();
                profile_error(format!(
                    "no bundled profile `{name}`; known: {}",
                    known.join(", ")
                ))
            })?;
        SimProfile::from_toml_str(text)
    }

    /// Parses and validates a profile.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] when the TOML is malformed or a value is invalid.
    pub fn from_toml_str(text: &str) -> Result<SimProfile, RunnerError> {
        let profile: SimProfile =
            toml::from_str(text).map_err(|e| profile_error(e.to_string().trim().to_owned()))?;
        profile.validate()?;
        Ok(profile)
    }

    /// Reads, parses and validates a profile file.
    ///
    /// # Errors
    /// [`RunnerError::Profile`] when the file cannot be read or is not a valid profile.
    pub fn load(path: impl AsRef<Path>) -> Result<SimProfile, RunnerError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| profile_error(format!("cannot read {}: {e}", path.display())))?;
        SimProfile::from_toml_str(&text)
            .map_err(|e| profile_error(format!("{}: {}", path.display(), strip_prefix(&e))))
    }

    /// The profile as TOML (parses back to an equal profile).
    ///
    /// # Errors
    /// [`RunnerError::Profile`] if serialisation fails (it does not for a valid profile).
    pub fn to_toml_string(&self) -> Result<String, RunnerError> {
        toml::to_string(self).map_err(|e| profile_error(e.to_string()))
    }
}

fn strip_prefix(e: &RunnerError) -> String {
    match e {
        RunnerError::Profile(m) => m.clone(),
        other => other.to_string(),
    }
}
