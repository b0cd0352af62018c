//! The L2's address map (schema 1.10): which of two partitions is home to an address.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Bytes;

/// Which of two L2 partitions is home to an address: the XOR of the address bits `bits`
/// and of one bit per page of `page_bytes` (from the physical address bits above the page,
/// which a program cannot see: a run learns each page's bit from the lines it reads
/// there). 1 is the partition of the map's reference SM (`map_reference_sm`).
///
/// ```
/// use topology::{Bytes, L2AddressMap};
/// let map = L2AddressMap {
///     bits: vec![12, 13, 15, 17, 19],
///     page_bytes: Bytes(2 << 20),
///     fitted_lines: 16896,
///     fit_agreement: 1.0,
///     predicted_lines: Some(16896),
///     predicted_right: Some(16896),
///     second_reference_sm: Some(2),
///     pages_learnt: Some(0),
/// };
/// assert_eq!(map.granularity(), Some(Bytes(4096)));
/// assert_eq!(map.prediction_accuracy(), Some(1.0));
/// assert_eq!(map.mask(), 0xab000);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct L2AddressMap {
    /// Byte-address bits below the page whose XOR gives the home (with the page's bit),
    /// ascending.
    pub bits: Vec<u32>,
    /// The page whose higher address bits add one bit per page.
    pub page_bytes: Bytes,
    /// Lines the function was fitted on (read cold by SMs off the first map's reference's
    /// partition).
    pub fitted_lines: u64,
    /// The share of them it reproduces.
    pub fit_agreement: f64,
    /// Lines it never saw, predicted (`--deep`): those of a second map with an SM of the
    /// other partition as its reference, read by the first reference's partition's SMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_lines: Option<u64>,
    /// Of them, predicted right.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_right: Option<u64>,
    /// The second map's reference SM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_reference_sm: Option<u32>,
    /// Pages of the second map the fit never saw (the buffer moved): the first line read in
    /// each taught that page's bit and is not among the lines predicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages_learnt: Option<u64>,
}

impl L2AddressMap {
    /// Bytes in a row with one home: the lowest bit's span.
    pub fn granularity(&self) -> Option<Bytes> {
        self.bits.first().map(|b| Bytes(1u64 << b))
    }

    /// The share of the fresh lines predicted right.
    pub fn prediction_accuracy(&self) -> Option<f64> {
        let (lines, right) = (self.predicted_lines?, self.predicted_right?);
        (lines > 0).then(|| right as f64 / lines as f64)
    }

    /// The bits as a mask over the byte address.
    pub fn mask(&self) -> u64 {
        self.bits
            .iter()
            .fold(0, |m, b| m | 1u64.checked_shl(*b).unwrap_or(0))
    }
}

impl fmt::Display for L2AddressMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits: Vec<String> = self.bits.iter().map(u32::to_string).collect();
        write!(
            f,
            "home = XOR of address bits {} (mask {:#x}) and one bit per {} page",
            bits.join(", "),
            self.mask(),
            self.page_bytes
        )?;
        if let Some(g) = self.granularity() {
            write!(f, "; {g} in a row share a home")?;
        }
        write!(
            f,
            "; reproduces {:.2} % of the {} lines fitted",
            100.0 * self.fit_agreement,
            self.fitted_lines
        )?;
        if let (Some(acc), Some(right), Some(lines)) = (
            self.prediction_accuracy(),
            self.predicted_right,
            self.predicted_lines,
        ) {
            write!(
                f,
                ", predicts {right} of {lines} lines it never saw ({:.2} %)",
                100.0 * acc
            )?;
            if let Some(pages) = self.pages_learnt.filter(|&p| p > 0) {
                write!(f, " ({pages} page bit(s) learnt from one line each)")?;
            }
        }
        Ok(())
    }
}
