//! The L2's address map: which of two partitions is home to a line, as a function of the
//! line's address.
//!
//! The partition map ([`super::map`]) tells, for every line an SM off the reference's
//! partition reads cold, whether it is near or far: far lines are homed in the reference's
//! partition. Treating "homed there" as a bit, the fit looks for an XOR (parity) of address
//! bits that gives it: a linear system over GF(2) whose unknowns are which address bits
//! below the page take part, plus one bit per page for everything above it. Above the page
//! the virtual address says nothing about the physical one the hardware hashes, so each
//! page's bit is learnt from the lines seen in it; below the page the virtual and the
//! physical address agree, and the bits found there are the hardware's.
//!
//! The function is believed when it reproduces (almost) every line it was fitted on and,
//! above all, predicts lines it never saw: the map is run a second time with the reference
//! in the other partition, whose other-side SMs read lines the fit did not use.
//!
//! ```
//! use pchase_runner::measure::l2::home::{fit, predict, HomeSample};
//! // Homes given by bits 12 and 15 and one bit per 2 MiB page.
//! let home = |a: u64| ((a >> 12) ^ (a >> 15) ^ (a >> 21)) & 1 == 1;
//! let lines = |from: u64, n: u64| -> Vec<HomeSample> {
//!     (0..n).map(|i| from + i * 128).map(|address| HomeSample { address, home: home(address) }).collect()
//! };
//! // The first 4 MiB fitted, 1 MiB further on (same pages) predicted.
//! let map = fit(&lines(0, 32768), 128, 2 << 20).unwrap();
//! assert_eq!(map.bits, [12, 15]);
//! let fresh = predict(&map, &lines(1 << 20, 8192));
//! assert_eq!((fresh.correct, fresh.lines), (8192, 8192));
//! ```

use std::collections::BTreeMap;

/// The page whose bit the fit learns per page: 2 MiB, the GPU's large page (every
/// `cuMemAlloc` of this size or more is mapped with it), so bits below it are the same in
/// the virtual and the physical address.
pub const PAGE_BYTES: u64 = 2 << 20;

/// Share of the fitted lines the function must reproduce; below it the homes are not an
/// XOR of address bits (or the map's levels were misread).
pub const MIN_AGREEMENT: f64 = 0.99;

/// Attempts of the fit, each from another order of the lines (a misread line that enters
/// the basis spoils one attempt, not all).
const ATTEMPTS: u64 = 6;

/// One line whose home was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeSample {
    /// The line's device address.
    pub address: u64,
    /// Whether it is homed in the partition the fit labels 1 (the first map's reference's).
    pub home: bool,
}

/// The home function found.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressMap {
    /// The address bits below the page whose XOR (with the page's bit) gives the home,
    /// ascending.
    pub bits: Vec<u32>,
    /// The page size the fit learns one bit for.
    pub page_bytes: u64,
    /// Each page's bit (page number = address / `page_bytes`).
    pub page_bits: BTreeMap<u64, bool>,
    /// Lines fitted.
    pub fitted: usize,
    /// The share of them the function reproduces.
    pub agreement: f64,
}

impl AddressMap {
    /// The bytes of one run of lines with one home: the lowest bit's span.
    pub fn granularity(&self) -> Option<u64> {
        self.bits.first().map(|b| 1u64 << b)
    }

    /// The home of `address` (the partition labelled 1 is `true`); `None` in a page the
    /// fit never saw.
    pub fn home(&self, address: u64) -> Option<bool> {
        let page = self.page_bits.get(&(address / self.page_bytes))?;
        Some(self.parity(address) ^ page)
    }

    /// The XOR of the address's bits `bits` (the home without the page's bit).
    pub fn parity(&self, address: u64) -> bool {
        self.bits
            .iter()
            .fold(false, |acc, &b| acc ^ (address >> b & 1 == 1))
    }
}

/// How well a map predicted lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Prediction {
    /// Lines predicted.
    pub lines: usize,
    /// Of them, predicted right.
    pub correct: usize,
    /// Pages the fit never saw: the first line read in each taught the page's bit and is
    /// not counted as predicted.
    pub pages_learnt: usize,
}

impl Prediction {
    /// The share predicted right; `None` without lines.
    pub fn accuracy(&self) -> Option<f64> {
        (self.lines > 0).then(|| self.correct as f64 / self.lines as f64)
    }
}

/// Predicts every sample's home with `map`. In a page the fit never saw (another buffer, or
/// the same after a reallocation) the page's bit comes from the page's first sample, which
/// is then not counted; the address bits are the fit's alone.
pub fn predict(map: &AddressMap, samples: &[HomeSample]) -> Prediction {
    let mut p = Prediction::default();
    let mut learnt: BTreeMap<u64, bool> = BTreeMap::new();
    for s in samples {
        let page = s.address / map.page_bytes;
        let parity = map.parity(s.address);
        let Some(&bit) = map.page_bits.get(&page).or(learnt.get(&page)) else {
            learnt.insert(page, parity ^ s.home);
            p.pages_learnt += 1;
            continue;
        };
        p.lines += 1;
        p.correct += usize::from((parity ^ bit) == s.home);
    }
    p
}

/// Fits the XOR of address bits (from the line's bit up to the page's) plus one bit per page
/// to `samples`.
///
/// # Errors
/// Where the samples cannot decide it: too few lines, address bits that never vary, more
/// pages than the fit holds, or no function that reproduces [`MIN_AGREEMENT`] of them.
pub fn fit(samples: &[HomeSample], line_bytes: u32, page_bytes: u64) -> Result<AddressMap, String> {
    if !line_bytes.is_power_of_two() || !page_bytes.is_power_of_two() {
        return Err("line and page sizes must be powers of two".into());
    }
    let low = line_bytes.trailing_zeros();
    let high = page_bytes.trailing_zeros();
    if high <= low {
        return Err("the page must be larger than the line".into());
    }
    let bit_columns = (high - low) as usize;
    let pages: Vec<u64> = {
        let mut p: Vec<u64> = samples.iter().map(|s| s.address / page_bytes).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let columns = bit_columns + pages.len();
    if columns > 128 {
        return Err(format!(
            "the lines span {} pages of {page_bytes} B, more than the fit holds",
            pages.len()
        ));
    }
    if samples.len() < 4 * columns {
        return Err(format!(
            "{} lines are too few to fit {columns} unknowns",
            samples.len()
        ));
    }
    let row = |s: &HomeSample| -> u128 {
        let offset = (s.address % page_bytes) >> low;
        let page = pages.binary_search(&(s.address / page_bytes)).unwrap_or(0);
        u128::from(offset) | 1u128 << (bit_columns + page)
    };
    let rows: Vec<(u128, bool)> = samples.iter().map(|s| (row(s), s.home)).collect();
    let varying = rows.iter().fold(0u128, |acc, (r, _)| acc | (r ^ rows[0].0));
    let constant_bits: Vec<u32> = (0..bit_columns)
        .filter(|&c| varying >> c & 1 == 0)
        .map(|c| c as u32 + low)
        .collect();
    if !constant_bits.is_empty() {
        return Err(format!(
            "address bits {constant_bits:?} never vary in the lines seen"
        ));
    }
    let mut best: Option<(usize, u128)> = None;
    for attempt in 0..ATTEMPTS {
        let Some(solution) = solve(&rows, columns, attempt) else {
            continue;
        };
        let right = rows
            .iter()
            .filter(|(r, y)| parity(r & solution) == *y)
            .count();
        if best.is_none_or(|(b, _)| right > b) {
            best = Some((right, solution));
        }
    }
    let (right, solution) = best.ok_or("the lines do not decide every unknown")?;
    let agreement = right as f64 / rows.len() as f64;
    if agreement < MIN_AGREEMENT {
        return Err(format!(
            "no XOR of address bits below {page_bytes} B explains the homes: the best reproduces {:.1} % of {} lines",
            100.0 * agreement,
            rows.len()
        ));
    }
    Ok(AddressMap {
        bits: (0..bit_columns)
            .filter(|&c| solution >> c & 1 == 1)
            .map(|c| c as u32 + low)
            .collect(),
        page_bytes,
        page_bits: pages
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, solution >> (bit_columns + i) & 1 == 1))
            .collect(),
        fitted: rows.len(),
        agreement,
    })
}

fn parity(x: u128) -> bool {
    x.count_ones() % 2 == 1
}

/// Gaussian elimination over GF(2) on the rows in a pseudo-random order (`attempt` seeds
/// it): the first rows that raise the rank form the basis. `None` where the rows do not
/// reach full rank.
fn solve(rows: &[(u128, bool)], columns: usize, attempt: u64) -> Option<u128> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    // A fixed permutation per attempt: sort by a mixed index.
    order.sort_by_key(|&i| mix(i as u64 ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    // basis[c]: a row whose lowest set column is c, with its right-hand side.
    let mut basis: Vec<Option<(u128, bool)>> = vec![None; columns];
    let mut rank = 0;
    for &i in &order {
        let (mut r, mut y) = rows[i];
        while r != 0 {
            let c = r.trailing_zeros() as usize;
            match basis[c] {
                Some((b, by)) => {
                    r ^= b;
                    y ^= by;
                }
                None => {
                    basis[c] = Some((r, y));
                    rank += 1;
                    break;
                }
            }
        }
        if rank == columns {
            break;
        }
    }
    if rank < columns {
        return None;
    }
    // Back substitution from the highest column down.
    let mut solution = 0u128;
    for c in (0..columns).rev() {
        let (r, y) = basis[c]?;
        let rest = r & !(1u128 << c);
        let value = y ^ parity(rest & solution);
        if value {
            solution |= 1u128 << c;
        }
    }
    Some(solution)
}

/// The SplitMix64 finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` lines from `from`, `step` bytes apart, homed by `home`.
    fn lines(from: u64, step: u64, n: u64, home: impl Fn(u64) -> bool) -> Vec<HomeSample> {
        (0..n)
            .map(|i| from + i * step)
            .map(|address| HomeSample {
                address,
                home: home(address),
            })
            .collect()
    }

    /// The home function measured on H200s: bits 12, 13, 15, 17, 19 and a per-page bit.
    fn measured(a: u64) -> bool {
        let bits = (a >> 12) ^ (a >> 13) ^ (a >> 15) ^ (a >> 17) ^ (a >> 19);
        (bits ^ mix(a >> 21)) & 1 == 1
    }

    #[test]
    fn recovers_the_measured_bits_and_predicts_other_lines() {
        // 8 MiB of lines from an address that is not page aligned, split at random into
        // the lines fitted and the fresh lines predicted.
        let base = (1 << 40) + (3 << 20);
        let (seen, fresh): (Vec<_>, Vec<_>) = lines(base, 128, 65536, measured)
            .into_iter()
            .partition(|s| mix(s.address) % 2 == 0);
        let map = fit(&seen, 128, PAGE_BYTES).unwrap();
        assert_eq!(map.bits, [12, 13, 15, 17, 19]);
        assert_eq!(map.granularity(), Some(4096));
        assert_eq!(map.page_bits.len(), 5);
        assert_eq!(map.agreement, 1.0);
        // The fresh lines, and lines past the pages seen.
        let p = predict(&map, &fresh);
        assert_eq!(
            (p.correct, p.lines, p.pages_learnt),
            (fresh.len(), fresh.len(), 0)
        );
        assert!(fresh.len() > 30000);
        // Another buffer: each page's first line teaches its bit, the bits do the rest.
        let beyond = lines(base + (64 << 20), 128, 65536, measured);
        let p = predict(&map, &beyond);
        // 8 MiB from an odd MiB: five pages.
        assert_eq!((p.correct, p.lines, p.pages_learnt), (65531, 65531, 5));
        // A function with a wrong bit fails there.
        let mut wrong = map.clone();
        wrong.bits[2] = 16;
        let p = predict(&wrong, &beyond);
        assert!(p.accuracy().unwrap() < 0.6, "{p:?}");
    }

    #[test]
    fn a_few_misread_lines_do_not_spoil_the_fit() {
        let mut seen = lines(1 << 30, 128, 16384, measured);
        for s in seen.iter_mut().step_by(997) {
            s.home = !s.home;
        }
        let map = fit(&seen, 128, PAGE_BYTES).unwrap();
        assert_eq!(map.bits, [12, 13, 15, 17, 19]);
        assert!(map.agreement > 0.998 && map.agreement < 1.0);
    }

    #[test]
    fn homes_that_are_no_xor_of_bits_are_refused() {
        // A home by the line number modulo 3 is no linear function of the bits.
        let seen = lines(0, 128, 16384, |a| (a >> 7) % 3 == 0);
        let e = fit(&seen, 128, PAGE_BYTES).unwrap_err();
        assert!(e.contains("no XOR of address bits"), "{e}");
    }

    #[test]
    fn bits_that_never_vary_and_too_few_lines_are_refused() {
        // Lines 4 KiB apart: bits 7 to 11 never change.
        let seen = lines(0, 4096, 4096, measured);
        assert!(fit(&seen, 128, PAGE_BYTES)
            .unwrap_err()
            .contains("never vary"));
        let few = lines(0, 128, 20, measured);
        assert!(fit(&few, 128, PAGE_BYTES).unwrap_err().contains("too few"));
        assert!(fit(&few, 100, PAGE_BYTES).is_err());
    }
}
