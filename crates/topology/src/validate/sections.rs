//! The benchmarks' sections ([`crate::Section`], schema 1.8): names and keys that a diff can
//! match, and every row's value by the checks of its kind.

use std::collections::{BTreeMap, BTreeSet};

use super::{Checker, MAX_COUNT};
use crate::section::{RowValue, Section};

/// Whether `name` is a section name: lower-case letters, digits and `-`, starting with a
/// letter (a benchmark's name on the command line).
fn is_section_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Whether `key` is a row key: lower-case letters, digits and `_`, starting with a letter.
fn is_row_key(key: &str) -> bool {
    key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

impl Checker {
    pub(super) fn sections(&mut self, sections: &BTreeMap<String, Section>) {
        for (name, section) in sections {
            let path = format!("sections.{name}");
            if !is_section_name(name) {
                self.fail(
                    path.clone(),
                    "a section's name is lower-case letters, digits and `-`, starting with a letter",
                );
            }
            if section.title.trim().is_empty() {
                self.fail(format!("{path}.title"), "must not be empty");
            }
            let mut keys = BTreeSet::new();
            for (i, row) in section.rows.iter().enumerate() {
                let at = format!("{path}.rows[{i}]");
                if !is_row_key(&row.key) {
                    self.fail(
                        format!("{at}.key"),
                        format!(
                            "`{}` is not a row key (lower-case letters, digits and `_`, starting with a letter)",
                            row.key
                        ),
                    );
                }
                if !keys.insert(row.key.as_str()) {
                    self.fail(
                        format!("{at}.key"),
                        format!("`{}` is the key of an earlier row", row.key),
                    );
                }
                if row.label.trim().is_empty() {
                    self.fail(format!("{at}.label"), "must not be empty");
                }
                match &row.value {
                    RowValue::Size(size) => self.size(&format!("{at}.size"), size),
                    RowValue::Latency(latency) => self.latency(&format!("{at}.latency"), latency),
                    RowValue::Count(count) if count.value > MAX_COUNT => self.fail(
                        format!("{at}.count.value"),
                        format!("{} is beyond any GPU", count.value),
                    ),
                    RowValue::Count(_) => {}
                    RowValue::Number(number) => {
                        if !number.value.is_finite() {
                            self.fail(
                                format!("{at}.number.value"),
                                format!("must be finite, found {}", number.value),
                            );
                        }
                        if let Some(error) = number.standard_error {
                            if !(error.is_finite() && error >= 0.0) {
                                self.fail(
                                    format!("{at}.number.standard_error"),
                                    format!("must be finite and not negative, found {error}"),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
