//! Two-sample Kolmogorov–Smirnov tests: the statistic, exact and asymptotic
//! p-values, the thesis' critical value, and a seeded permutation test of the
//! largest statistic over all split points of a series.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::{CpdError, Result};
use crate::signal::validate_series;

/// Above this sample size the exact p-value is not attempted (scipy's
/// `MAX_AUTO_N`), and the asymptotic one is used instead.
pub const EXACT_MAX_SAMPLE_SIZE: usize = 10_000;

/// How a p-value was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PValueMethod {
    /// The exact null distribution of the statistic.
    Exact,
    /// Kolmogorov's limiting distribution, because the exact computation was
    /// infeasible.
    AsymptoticFallback(ExactInfeasible),
}

/// Why the exact p-value was not computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExactInfeasible {
    /// A sample has more than [`EXACT_MAX_SAMPLE_SIZE`] values.
    SampleTooLarge,
    /// The computation lost its accuracy (a result outside `[0, 1]`).
    NumericalFailure,
}

/// The outcome of a two-sample Kolmogorov–Smirnov test (two-sided).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KsTest {
    /// `D = sup_v |F_left(v) − F_right(v)|` of the two empirical distribution
    /// functions.
    pub statistic: f64,
    /// `P(D ≥ observed)` under the null hypothesis of equal distributions.
    pub p_value: f64,
    /// How the p-value was computed.
    pub method: PValueMethod,
    /// Size of the first sample.
    pub n_left: usize,
    /// Size of the second sample.
    pub n_right: usize,
}

impl KsTest {
    /// Whether the test rejects equal distributions at level `alpha` by its
    /// p-value (`p < alpha`).
    pub fn rejects_at(&self, alpha: f64) -> bool {
        self.p_value < alpha
    }

    /// Whether the statistic exceeds the thesis' critical value
    /// [`ks_critical_value`] for `alpha` (`false` for an invalid `alpha`).
    pub fn exceeds_critical_value(&self, alpha: f64) -> bool {
        ks_critical_value(alpha, self.n_left, self.n_right).is_ok_and(|c| self.statistic > c)
    }
}

/// The two-sample statistic as the integer `h = lcm(n, m) · D`, exact even with
/// ties (equal values move both distribution functions at once).
fn statistic_lattice(left: &[f64], right: &[f64]) -> (u64, u64) {
    let mut a = left.to_vec();
    let mut b = right.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len() as u64, b.len() as u64);
    let g = gcd(n, m);
    let (mut i, mut j) = (0usize, 0usize);
    let mut best: u64 = 0;
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => unreachable!("the loop condition keeps one sample open"),
        };
        while i < a.len() && a[i] == v {
            i += 1;
        }
        while j < b.len() && b[j] == v {
            j += 1;
        }
        // |i/n − j/m| · lcm = |i·m − j·n| / g
        let diff = (i as u64 * m).abs_diff(j as u64 * n) / g;
        best = best.max(diff);
    }
    (best, n / g * m)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn validate_samples(left: &[f64], right: &[f64]) -> Result<()> {
    validate_series(left, "left sample")?;
    validate_series(right, "right sample")
}

/// The two-sample Kolmogorov–Smirnov statistic `D`.
///
/// ```
/// let d = cpd::ks_statistic(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0])?;
/// assert!((d - 1.0 / 3.0).abs() < 1e-15);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn ks_statistic(left: &[f64], right: &[f64]) -> Result<f64> {
    validate_samples(left, right)?;
    let (h, lcm) = statistic_lattice(left, right);
    Ok(h as f64 / lcm as f64)
}

/// The two-sided two-sample Kolmogorov–Smirnov test, with the exact p-value
/// where feasible (both samples at most [`EXACT_MAX_SAMPLE_SIZE`]) and
/// Kolmogorov's asymptotic one otherwise, as the result's `method` says.
///
/// The exact p-value is that of scipy 1.17.1's `ks_2samp(method="exact")`:
/// the probability, for continuous data, that a random interleaving of the two
/// samples reaches the observed `D` (a lattice-path count; Hodges 1958,
/// Viehmann 2021). Ties in the data are handled in `D`, which is computed on
/// the distribution functions with ties.
///
/// ```
/// // x = 1..=10 against y = 6..=20 (scipy 1.17.1: D = 2/3, p = 0.005514629400751357).
/// let x: Vec<f64> = (1..=10).map(f64::from).collect();
/// let y: Vec<f64> = (6..=20).map(f64::from).collect();
/// let test = cpd::ks_2samp(&x, &y)?;
/// assert!((test.statistic - 2.0 / 3.0).abs() < 1e-15);
/// assert!((test.p_value - 0.005514629400751357).abs() < 1e-10);
/// assert_eq!(test.method, cpd::PValueMethod::Exact);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn ks_2samp(left: &[f64], right: &[f64]) -> Result<KsTest> {
    validate_samples(left, right)?;
    let (h, lcm) = statistic_lattice(left, right);
    let (n, m) = (left.len(), right.len());
    let statistic = h as f64 / lcm as f64;
    let (p_value, method) = match exact_p_value_lattice(n, m, h) {
        Ok(p) => (p, PValueMethod::Exact),
        Err(reason) => (
            ks_asymptotic_p_value(n, m, statistic)?,
            PValueMethod::AsymptoticFallback(reason),
        ),
    };
    Ok(KsTest {
        statistic,
        p_value,
        method,
        n_left: n,
        n_right: m,
    })
}

/// The exact two-sided p-value `P(D ≥ statistic)` for sample sizes `n` and `m`
/// and continuous data, or why it is infeasible.
///
/// The statistic is rounded to the lattice `h / lcm(n, m)` it lives on.
pub fn ks_exact_p_value(
    n: usize,
    m: usize,
    statistic: f64,
) -> Result<std::result::Result<f64, ExactInfeasible>> {
    check_sizes(n, m)?;
    if !(statistic.is_finite() && (0.0..=1.0).contains(&statistic)) {
        return Err(CpdError::InvalidParameter {
            name: "statistic",
            reason: format!("{statistic} is not in [0, 1]"),
        });
    }
    let g = gcd(n as u64, m as u64);
    let lcm = (n as u64 / g) * m as u64;
    let h = (statistic * lcm as f64).round() as u64;
    Ok(exact_p_value_lattice(n, m, h))
}

fn check_sizes(n: usize, m: usize) -> Result<()> {
    if n == 0 || m == 0 {
        return Err(CpdError::Empty {
            what: if n == 0 {
                "left sample"
            } else {
                "right sample"
            },
        });
    }
    Ok(())
}

fn exact_p_value_lattice(n: usize, m: usize, h: u64) -> std::result::Result<f64, ExactInfeasible> {
    if n.max(m) > EXACT_MAX_SAMPLE_SIZE {
        return Err(ExactInfeasible::SampleTooLarge);
    }
    if h == 0 {
        return Ok(1.0);
    }
    let p = if n == m {
        prob_outside_square(n as u64, h)
    } else {
        prob_outside_band(n as u64, m as u64, gcd(n as u64, m as u64), h)
    };
    if p.is_finite() && (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(ExactInfeasible::NumericalFailure)
    }
}

/// `P(D_{n,n} ≥ h/n)`: the alternating binomial sum, in Horner form without
/// cancellation (scipy's `_compute_prob_outside_square`).
fn prob_outside_square(n: u64, h: u64) -> f64 {
    let (n, h) = (n as f64, h as f64);
    let mut p = 0.0;
    let mut k = (n / h).floor();
    while k >= 0.0 {
        let mut term = 1.0;
        let mut j = 0.0;
        while j < h {
            term = (n - k * h - j) * term / (n + k * h + j + 1.0);
            j += 1.0;
        }
        p = term * (1.0 - p);
        k -= 1.0;
    }
    2.0 * p
}

/// `P(D_{m,n} ≥ h/lcm)` for unequal sizes: the share of lattice paths from
/// (0, 0) to (m, n) that leave the band `|i·n/g − j·m/g| < h`, computed column by
/// column as a probability so nothing overflows (Viehmann 2021; scipy's
/// `_compute_outer_prob_inside_method`).
fn prob_outside_band(m: u64, n: u64, g: u64, h: u64) -> f64 {
    let (m, n) = if m < n { (n, m) } else { (m, n) };
    let (mg, ng) = ((m / g) as i64, (n / g) as i64);
    let (n, h) = (n as i64, h as i64);
    let floor_div = |a: i64, b: i64| a.div_euclid(b);
    let ceil_div = |a: i64, b: i64| -(-a).div_euclid(b);
    let mut min_j: i64 = 0;
    let mut max_j: i64 = ceil_div(h, mg).min(n + 1);
    let mut cur_len = max_j - min_j;
    // a[j − min_j]: probability that a path to (i, j) has left the band; entries
    // past the window are 1 (outside).
    let mut a = vec![1.0_f64; (n + 2) as usize];
    for v in a.iter_mut().take(max_j as usize) {
        *v = 0.0;
    }
    for i in 1..=m as i64 {
        let (last_min_j, last_len) = (min_j, cur_len);
        min_j = (floor_div(ng * i - h, mg) + 1).clamp(0, n);
        max_j = ceil_div(ng * i + h, mg).min(n + 1);
        if max_j <= min_j {
            return 1.0;
        }
        let mut val = if min_j == 0 { 0.0 } else { 1.0 };
        let fi = i as f64;
        for jj in 0..(max_j - min_j) {
            let j = jj + min_j;
            let fj = j as f64;
            val = (a[(jj + min_j - last_min_j) as usize] * fi + val * fj) / (fi + fj);
            a[jj as usize] = val;
        }
        cur_len = max_j - min_j;
        if last_len > cur_len {
            for v in &mut a[cur_len as usize..last_len as usize] {
                *v = 1.0;
            }
        }
    }
    a[(max_j - min_j - 1) as usize]
}

/// Kolmogorov's limiting two-sided p-value `Q(√(nm/(n+m)) · D)` with
/// `Q(λ) = 2 Σ_{k≥1} (−1)^{k−1} e^{−2k²λ²}`.
///
/// scipy 1.17.1 uses the one-sample distribution of size `round(nm/(n+m))`
/// instead; the two agree as the samples grow.
pub fn ks_asymptotic_p_value(n: usize, m: usize, statistic: f64) -> Result<f64> {
    check_sizes(n, m)?;
    if !(statistic.is_finite() && (0.0..=1.0).contains(&statistic)) {
        return Err(CpdError::InvalidParameter {
            name: "statistic",
            reason: format!("{statistic} is not in [0, 1]"),
        });
    }
    let (n, m) = (n as f64, m as f64);
    let lambda = (n * m / (n + m)).sqrt() * statistic;
    Ok(kolmogorov_survival(lambda))
}

/// `Q(λ) = P(K > λ)` of the Kolmogorov distribution.
pub(crate) fn kolmogorov_survival(lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    // For small λ the alternating series converges slowly; the Jacobi theta
    // form of the distribution function converges fast there.
    if lambda < 1.18 {
        let x = -std::f64::consts::PI.powi(2) / (8.0 * lambda * lambda);
        let cdf: f64 = (1..=20)
            .map(|k| ((2 * k - 1) as f64).powi(2) * x)
            .map(f64::exp)
            .sum::<f64>()
            * (2.0 * std::f64::consts::PI).sqrt()
            / lambda;
        (1.0 - cdf).clamp(0.0, 1.0)
    } else {
        let mut sum = 0.0;
        for k in 1..=100 {
            let kf = k as f64;
            let term = (-2.0 * kf * kf * lambda * lambda).exp();
            sum += if k % 2 == 1 { term } else { -term };
            if term < 1e-300 {
                break;
            }
        }
        (2.0 * sum).clamp(0.0, 1.0)
    }
}

/// The thesis' critical value of the two-sample test at level `alpha`:
/// `d_α = sqrt(−½ · ln(α/2) · (n+m)/(n·m))`. A statistic above it rejects equal
/// distributions.
///
/// ```
/// let d = cpd::ks_critical_value(0.05, 100, 100)?;
/// assert!((d - (-0.5 * (0.025f64).ln() * 200.0 / 10000.0).sqrt()).abs() < 1e-15);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn ks_critical_value(alpha: f64, n: usize, m: usize) -> Result<f64> {
    check_sizes(n, m)?;
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(CpdError::InvalidParameter {
            name: "alpha",
            reason: format!("{alpha} is not in (0, 1)"),
        });
    }
    let (n, m) = (n as f64, m as f64);
    Ok((-0.5 * (alpha / 2.0).ln() * (n + m) / (n * m)).sqrt())
}

/// The outcome of [`ks_max_split_permutation_test`].
#[derive(Debug, Clone, PartialEq)]
pub struct MaxSplitKsTest {
    /// The split (first index of the right part) with the largest scaled statistic.
    pub split: usize,
    /// The plain statistic `D` at that split.
    pub statistic: f64,
    /// The largest scaled statistic `sqrt(k(n−k)/n) · D_k` over all splits `k`.
    pub scaled_statistic: f64,
    /// `(1 + #{permutations at least as extreme}) / (1 + permutations)`.
    pub p_value: f64,
    /// Number of permutations drawn.
    pub permutations: usize,
}

/// A permutation test for one change in distribution anywhere in a series.
///
/// For every split `k` with at least `min_size` values on each side, the
/// statistic `D_k` compares the values before and after `k`; it is scaled by
/// `sqrt(k(n−k)/n)` so that splits near the ends (small samples, large `D` by
/// chance) do not dominate, and the largest scaled value is the test statistic.
/// Its null distribution comes from `permutations` random reorderings of the
/// series drawn from a ChaCha8 generator seeded with `seed`, so a result is
/// reproducible. Each reordering costs O(n · distinct values).
///
/// ```
/// let mut series: Vec<f64> = (0..30).map(|i| (i % 7) as f64).collect();
/// series.extend((0..30).map(|i| 10.0 + (i % 5) as f64));
/// let test = cpd::ks_max_split_permutation_test(&series, 5, 199, 7)?;
/// assert_eq!(test.split, 30);
/// assert!(test.p_value <= 0.01);
/// # Ok::<(), cpd::CpdError>(())
/// ```
pub fn ks_max_split_permutation_test(
    series: &[f64],
    min_size: usize,
    permutations: usize,
    seed: u64,
) -> Result<MaxSplitKsTest> {
    validate_series(series, "series")?;
    let min_size = min_size.max(1);
    let n = series.len();
    if n < 2 * min_size {
        return Err(CpdError::TooShort {
            len: n,
            needed: 2 * min_size,
        });
    }
    if permutations == 0 {
        return Err(CpdError::InvalidParameter {
            name: "permutations",
            reason: "at least one permutation is needed".into(),
        });
    }
    // Dense ranks: equal values share a rank, so ties are exact.
    let mut sorted = series.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let ranks: Vec<usize> = series
        .iter()
        .map(|v| sorted.partition_point(|s| s < v))
        .collect();
    let mut totals = vec![0usize; sorted.len()];
    for &r in &ranks {
        totals[r] += 1;
    }
    let (observed_split, observed_d, observed) = max_scaled_statistic(&ranks, &totals, min_size);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut shuffled = ranks.clone();
    let mut at_least = 0usize;
    for _ in 0..permutations {
        shuffled.shuffle(&mut rng);
        let (_, _, value) = max_scaled_statistic(&shuffled, &totals, min_size);
        // A relative tolerance keeps permutations that tie the observed value in
        // exact arithmetic from being lost to rounding.
        if value >= observed * (1.0 - 1e-12) {
            at_least += 1;
        }
    }
    Ok(MaxSplitKsTest {
        split: observed_split,
        statistic: observed_d,
        scaled_statistic: observed,
        p_value: (1 + at_least) as f64 / (1 + permutations) as f64,
        permutations,
    })
}

/// (split, D at the split, largest scaled statistic) over admissible splits.
fn max_scaled_statistic(ranks: &[usize], totals: &[usize], min_size: usize) -> (usize, f64, f64) {
    let n = ranks.len();
    let mut left = vec![0usize; totals.len()];
    for &r in &ranks[..min_size - 1] {
        left[r] += 1;
    }
    let mut best = (min_size, 0.0, f64::NEG_INFINITY);
    for k in min_size..=n - min_size {
        left[ranks[k - 1]] += 1;
        let (kl, kr) = (k as f64, (n - k) as f64);
        let (mut cum_left, mut cum_total) = (0usize, 0usize);
        let mut d: f64 = 0.0;
        for (l, t) in left.iter().zip(totals) {
            cum_left += l;
            cum_total += t;
            d = d.max((cum_left as f64 / kl - (cum_total - cum_left) as f64 / kr).abs());
        }
        let scaled = (kl * kr / n as f64).sqrt() * d;
        if scaled > best.2 {
            best = (k, d, scaled);
        }
    }
    best
}
