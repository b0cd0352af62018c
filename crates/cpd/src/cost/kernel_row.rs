//! Rows of the Gaussian Gram matrix, vectorised: the inner loop of the RBF cost.
//!
//! The RBF searches evaluate O(n²) kernels, so the exponential dominates their
//! time. `f64::exp` is a scalar libm call; here the exponential is a branch-free
//! polynomial that the compiler vectorises, compiled for the baseline target,
//! for AVX2 + FMA and for AVX-512, chosen at run time. (The `wide` crate has a
//! vector exp, but it picks its instructions at compile time, so without
//! `-C target-cpu` it would run on SSE2.)

/// `2^52 + 2^51`: adding it rounds a double of magnitude below 2^51 to an
/// integer held in the low mantissa bits.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;
/// ln 2 split so that `r · LN2_HI` is exact for |r| < 2^11 (Cody–Waite).
const LN2_HI: f64 = 0.693_145_751_953_125;
const LN2_LO: f64 = 1.428_606_820_309_417_3e-6;
/// Below this, e^x is under 1e-307: treated as 0 (exact to the last bit of any
/// sum that also holds the kernel's diagonal, 1).
const MIN_ARG: f64 = -708.0;

/// `e^x` for `x ≤ 0` (NaN-free input), within about 1 ulp: `x = r ln 2 + y`,
/// `|y| ≤ ln 2 / 2`, the Taylor polynomial of degree 13 for `e^y` (truncation
/// error below 1e-17) and `2^r` built in the exponent bits.
#[inline(always)]
pub(crate) fn exp_non_positive<const FMA: bool>(x: f64) -> f64 {
    let fma = |a: f64, b: f64, c: f64| if FMA { a.mul_add(b, c) } else { a * b + c };
    let x = x.max(MIN_ARG);
    let shifted = x * std::f64::consts::LOG2_E + ROUND_MAGIC;
    let r = shifted - ROUND_MAGIC;
    let y = fma(-r, LN2_LO, fma(-r, LN2_HI, x));
    const C: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let mut p = C[13];
    for &c in C[..13].iter().rev() {
        p = fma(p, y, c);
    }
    // The low bits of `shifted` hold r (two's complement); r + 1023 ∈ [1, 1023].
    let scale = f64::from_bits(shifted.to_bits().wrapping_add(1023) << 52);
    p * scale
}

/// The AVX-512 exponential: `e^x` for `x ≤ 0`, eight at a time, within one
/// ulp of libm (tested: three results in four equal libm's). It does the work
/// of [`exp_non_positive`] with about half the multiply–adds:
/// `x = (16 m + j) ln 2 / 16 + y` with `|y| ≤ ln 2 / 32`, `2^{j/16}` read from
/// a 16-entry table held in two registers (one permute), a degree-6
/// polynomial for `e^y − 1` (absolute error below 1.4e-17: the equal-ripple
/// fit through the Chebyshev extrema of the interval, the first step of
/// Remez' exchange) and `2^m` applied by `vscalefpd`. The table's rounding
/// (half an ulp) and the final multiply–add's (half an ulp) make the error:
/// at most about 1.06 ulp from the exact value. The constants come from
/// `scripts/cpd/exp_coefficients.py`.
#[cfg(all(target_arch = "x86_64", cpd_avx512))]
#[clippy::msrv = "1.89"]
pub(crate) mod avx512 {
    use std::arch::x86_64::{
        __m512d, __mmask8, _mm512_add_pd, _mm512_castpd_si512, _mm512_fmadd_pd, _mm512_fnmadd_pd,
        _mm512_loadu_pd, _mm512_mask_storeu_pd, _mm512_maskz_loadu_pd, _mm512_maskz_mov_pd,
        _mm512_max_pd, _mm512_mul_pd, _mm512_permutex2var_pd, _mm512_reduce_add_pd,
        _mm512_scalef_pd, _mm512_set1_pd, _mm512_setzero_pd, _mm512_sub_pd,
    };

    use super::MIN_ARG;

    /// `1.5 · 2^48`: adding it rounds a double of magnitude below 2^47 to a
    /// multiple of 1/16, whose sixteenths sit in the low mantissa bits.
    const ROUND_SIXTEENTHS: f64 = 422_212_465_065_984.0;
    /// `ln 2` in two parts, the high one with 38 significant bits (so that
    /// `r/16 · LN2_HI` is exact for |r| < 2^15).
    const LN2_HI: f64 = 0.693_147_180_558_298_7;
    const LN2_LO: f64 = 1.646_594_958_289_708_2e-12;
    /// `e^y − 1 ≈ Σ_{i=1}^{6} C[i−1] y^i` on `|y| ≤ ln 2 / 32`.
    const C: [f64; 6] = [
        1.000_000_000_000_003_8,
        0.500_000_000_000_000_4,
        0.166_666_666_614_797_18,
        0.041_666_666_660_183,
        0.008_333_519_522_870_82,
        0.001_388_912_162_538_419,
    ];
    /// `2^{j/16}` rounded to double.
    const TABLE: [f64; 16] = [
        1.0,
        1.044_273_782_427_413_8,
        1.090_507_732_665_257_7,
        1.138_788_634_756_691_6,
        1.189_207_115_002_721,
        1.241_857_812_073_484,
        1.296_839_554_651_009_6,
        1.354_255_546_936_892_7,
        std::f64::consts::SQRT_2,
        1.476_826_145_939_499_3,
        1.542_210_825_407_940_7,
        1.610_490_331_949_254_3,
        1.681_792_830_507_429,
        1.756_252_160_373_299_5,
        1.834_008_086_409_342_4,
        1.915_206_561_397_147_4,
    ];

    /// `e^x` lane by lane for `x ≤ 0` (NaN-free); below −708 the result is
    /// `e^{−708}` < 1e-307, as in [`super::exp_non_positive`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn exp_non_positive(x: __m512d) -> __m512d {
        exp_in_range(_mm512_max_pd(x, _mm512_set1_pd(MIN_ARG)))
    }

    /// `e^x` lane by lane for `−708 ≤ x ≤ 0` (one instruction less: no clamp).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn exp_in_range(x: __m512d) -> __m512d {
        let magic = _mm512_set1_pd(ROUND_SIXTEENTHS);
        // r/16 = round(16 x / ln 2)/16; the low four mantissa bits of `shifted`
        // are j = r mod 16 (two's complement), the table index, and
        // floor(r/16) = m is what scalef applies.
        let shifted = _mm512_fmadd_pd(x, _mm512_set1_pd(std::f64::consts::LOG2_E), magic);
        let r16 = _mm512_sub_pd(shifted, magic);
        let y = _mm512_fnmadd_pd(r16, _mm512_set1_pd(LN2_HI), x);
        let y = _mm512_fnmadd_pd(r16, _mm512_set1_pd(LN2_LO), y);
        let mut p = _mm512_set1_pd(C[5]);
        for &c in C[..5].iter().rev() {
            p = _mm512_fmadd_pd(p, y, _mm512_set1_pd(c));
        }
        let q = _mm512_mul_pd(p, y);
        let index = _mm512_castpd_si512(shifted);
        // SAFETY: the table has 16 elements, read as two vectors of eight.
        let hi = unsafe {
            _mm512_permutex2var_pd(
                _mm512_loadu_pd(TABLE.as_ptr()),
                index,
                _mm512_loadu_pd(TABLE.as_ptr().add(8)),
            )
        };
        // 2^{j/16} e^y = hi (1 + q).
        let mantissa = _mm512_fmadd_pd(hi, q, hi);
        // scalef multiplies by 2^floor(r / 16) = 2^m.
        _mm512_scalef_pd(mantissa, r16)
    }

    /// [`super::triangle_sums`] on a CPU with AVX-512F: eight kernels at a
    /// time, each added to its row's sum and to its column's running sum in
    /// one pass (the last chunk of a row masked).
    ///
    /// # Safety
    ///
    /// The CPU has AVX-512F; `lower` and `upper` are as long as `xs`.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn triangle_sums(
        xs: &[f64],
        gamma: f64,
        clamp: bool,
        lower: &mut [f64],
        upper: &mut [f64],
    ) {
        let len = xs.len();
        debug_assert!(lower.len() == len && upper.len() == len);
        let neg_gamma = _mm512_set1_pd(-gamma);
        let zero = _mm512_setzero_pd();
        for t in 1..len {
            let x_t = _mm512_set1_pd(xs[t]);
            let mut row = zero;
            let mut s = 0;
            while s < t {
                let lanes = (t - s).min(8);
                let mask: __mmask8 = if lanes == 8 { 0xff } else { (1u8 << lanes) - 1 };
                // SAFETY: the lanes s..s + lanes < t ≤ len are inside `xs` and
                // `upper`; masked-off lanes are not accessed.
                unsafe {
                    let diff = _mm512_sub_pd(_mm512_maskz_loadu_pd(mask, xs.as_ptr().add(s)), x_t);
                    let argument = _mm512_mul_pd(_mm512_mul_pd(neg_gamma, diff), diff);
                    let kernel = _mm512_maskz_mov_pd(
                        mask,
                        if clamp {
                            exp_non_positive(argument)
                        } else {
                            exp_in_range(argument)
                        },
                    );
                    row = _mm512_add_pd(row, kernel);
                    let column = upper.as_mut_ptr().add(s);
                    _mm512_mask_storeu_pd(
                        column,
                        mask,
                        _mm512_add_pd(_mm512_maskz_loadu_pd(mask, column), kernel),
                    );
                }
                s += lanes;
            }
            lower[t] = _mm512_reduce_add_pd(row);
        }
    }
}

/// `out[i] = exp(−γ (xs[i] − x)²)`.
#[inline(always)]
pub(crate) fn series_row<const FMA: bool>(xs: &[f64], x: f64, gamma: f64, out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(xs) {
        let diff = v - x;
        *o = exp_non_positive::<FMA>(-gamma * diff * diff);
    }
}

/// `out[i] = exp(−γ · out[i])` (squared distances in, kernels out).
#[inline(always)]
fn exp_in_place<const FMA: bool>(gamma: f64, out: &mut [f64]) {
    for o in out.iter_mut() {
        *o = exp_non_positive::<FMA>(-gamma * *o);
    }
}

/// The widest vector instruction set the hot loops are compiled for that this
/// machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) enum Simd {
    /// The compile-time target (SSE2 on x86-64).
    Baseline,
    /// AVX2 and FMA: four doubles per instruction.
    Avx2,
    /// AVX-512F (with AVX2 and FMA): eight doubles per instruction.
    Avx512,
}

/// Detects [`Simd`] once.
pub(crate) fn simd() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            let avx2 = std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma");
            if avx2 && std::arch::is_x86_feature_detected!("avx512f") {
                Simd::Avx512
            } else if avx2 {
                Simd::Avx2
            } else {
                Simd::Baseline
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Simd::Baseline
    }
}

/// Defines `$name(args) -> ret`, which runs the `#[inline(always)]` generic
/// `$body::<FMA>(args)` compiled for the best [`Simd`] level of the machine.
macro_rules! dispatch_simd {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $body:ident;) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body::<true>($($arg),*)
                }
                match $crate::cost::kernel_row::simd() {
                    // SAFETY: the CPU has these features (checked at run time).
                    $crate::cost::kernel_row::Simd::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    $crate::cost::kernel_row::Simd::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::cost::kernel_row::Simd::Baseline => {}
                }
            }
            $body::<false>($($arg),*)
        }
    };
}
pub(crate) use dispatch_simd;

dispatch_simd! {
    fn series_row_best(xs: &[f64], x: f64, gamma: f64, out: &mut [f64]) = series_row;
}

dispatch_simd! {
    fn exp_in_place_best(gamma: f64, out: &mut [f64]) = exp_in_place;
}

/// `out[i] = exp(−γ ‖row_{first+i} − row_point‖²)` for the rows
/// `first..first + out.len()` of a row-major `values` with `n_dims` columns.
pub(crate) fn gaussian_kernel_row(
    values: &[f64],
    n_dims: usize,
    gamma: f64,
    first: usize,
    point: usize,
    out: &mut [f64],
) {
    if n_dims == 1 {
        let xs = &values[first..first + out.len()];
        series_row_best(xs, values[point], gamma, out);
        return;
    }
    let p = &values[point * n_dims..point * n_dims + n_dims];
    for (i, o) in out.iter_mut().enumerate() {
        let row = &values[(first + i) * n_dims..(first + i + 1) * n_dims];
        *o = row.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
    }
    exp_in_place_best(gamma, out);
}

/// For every `t`, `lower[t] = Σ_{s<t} k(x_s, x_t)`, and for every `s`,
/// `upper[s] = Σ_{t>s} k(x_s, x_t)`: the strict lower triangle of the Gram
/// matrix of a series summed by rows and by columns, each kernel evaluated
/// once (`lower[0] = 0`; `upper` is added to). Returns `false`, touching
/// nothing, where the AVX-512 version is not available.
pub(crate) fn triangle_sums(xs: &[f64], gamma: f64, lower: &mut [f64], upper: &mut [f64]) -> bool {
    #[cfg(all(target_arch = "x86_64", cpd_avx512))]
    if simd() == Simd::Avx512 && lower.len() == xs.len() && upper.len() == xs.len() {
        let (lowest, highest) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        // The clamp is needed only where some γ (x_s − x_t)² may pass 708.
        let widest = gamma * (highest - lowest) * (highest - lowest);
        let clamp = widest.is_nan() || widest > 700.0;
        // SAFETY: the CPU has AVX-512F (checked); the lengths match.
        unsafe { avx512::triangle_sums(xs, gamma, clamp, lower, upper) };
        return true;
    }
    let _ = (xs, gamma, lower, upper);
    false
}

/// The sum of `xs` in eight interleaved partial sums, which the compiler
/// vectorises (a plain `iter().sum()` is one chain of dependent additions).
#[inline]
pub(crate) fn sum(xs: &[f64]) -> f64 {
    const LANES: usize = 8;
    let mut partial = [0.0; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail: f64 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (p, &x) in partial.iter_mut().zip(chunk) {
            *p += x;
        }
    }
    partial.iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_exp_matches_libm_to_a_few_ulp() {
        let mut x = 0.0f64;
        while x > -710.0 {
            for got in [exp_non_positive::<false>(x), exp_non_positive::<true>(x)] {
                let want = x.exp();
                if x >= MIN_ARG {
                    assert!(
                        (got - want).abs() <= 4.0 * f64::EPSILON * want,
                        "exp({x}) = {got}, libm {want}"
                    );
                } else {
                    assert!(got <= 1e-307);
                }
            }
            x -= 0.0137;
        }
        assert_eq!(exp_non_positive::<false>(0.0), 1.0);
    }

    #[cfg(all(target_arch = "x86_64", cpd_avx512))]
    #[clippy::msrv = "1.89"]
    #[test]
    fn avx512_exp_is_within_one_ulp_of_libm() {
        use std::arch::x86_64::{_mm512_loadu_pd, _mm512_storeu_pd};
        /// Distance of `got` from `want` in units of `want`'s last place.
        fn ulps(got: f64, want: f64) -> f64 {
            let ulp = f64::from_bits(want.to_bits() + 1) - want;
            (got - want).abs() / ulp
        }
        if simd() != Simd::Avx512 {
            eprintln!("no AVX-512 on this machine: the AVX-512 exponential is not used");
            return;
        }
        // A dense sweep of [−710, 0] (every table index and reduction boundary
        // is hit many times), the tiny arguments next to 0 and the arguments at
        // multiples of ln 2 / 32 where |y| is largest.
        let mut xs: Vec<f64> = (0..2_000_000).map(|i| -(i as f64) * 3.55e-4).collect();
        xs.extend((0..1_000).map(|i| -(f64::EPSILON * i as f64)));
        xs.extend((0..1_000).map(|i| -1e-300 * i as f64));
        xs.extend((0..32_000).map(|i| -(i as f64 + 0.5) * std::f64::consts::LN_2 / 16.0));
        xs.extend([-0.0, f64::MIN, -1e300, -708.0, -707.999, -745.0]);
        while !xs.len().is_multiple_of(8) {
            xs.push(-1.0);
        }
        let (mut worst, mut off) = (0.0f64, 0usize);
        for chunk in xs.chunks_exact(8) {
            let mut got = [0.0; 8];
            let mut unclamped = [0.0; 8];
            // SAFETY: the machine has AVX-512F (checked above); the pointers
            // address eight doubles each.
            unsafe {
                let x = _mm512_loadu_pd(chunk.as_ptr());
                _mm512_storeu_pd(got.as_mut_ptr(), avx512::exp_non_positive(x));
                _mm512_storeu_pd(unclamped.as_mut_ptr(), avx512::exp_in_range(x));
            }
            for ((&x, &got), &unclamped) in chunk.iter().zip(&got).zip(&unclamped) {
                if x >= MIN_ARG {
                    assert_eq!(got.to_bits(), unclamped.to_bits(), "exp({x:e})");
                    let error = ulps(got, x.exp());
                    assert!(
                        error <= 1.0,
                        "exp({x:e}) = {got:e}, libm {:e}: {error} ulp",
                        x.exp()
                    );
                    worst = worst.max(error);
                    off += usize::from(error > 0.0);
                } else {
                    assert!(got > 0.0 && got <= 1e-307, "exp({x:e}) = {got:e}");
                }
            }
        }
        eprintln!(
            "AVX-512 exponential: {off} of {} results one ulp from libm, the rest equal",
            xs.len()
        );
        // Results differ from libm's by whole ulps: mostly none.
        assert!(off * 3 < xs.len(), "{off} of {} off by one ulp", xs.len());
    }

    #[test]
    fn triangle_sums_match_the_scalar_kernel() {
        // Lengths around multiples of eight (masked last chunks), a narrow
        // series and a wide one (the exponential's clamp).
        for (len, scale) in [
            (1, 1.0),
            (2, 1.0),
            (9, 0.7),
            (16, 0.7),
            (37, 0.7),
            (101, 40.0),
        ] {
            let xs: Vec<f64> = (0..len)
                .map(|i| ((i * 7919) % 31) as f64 * 0.37 * scale - 4.0)
                .collect();
            let (mut lower, mut upper) = (vec![0.0; len], vec![0.5; len]);
            if !triangle_sums(&xs, 0.3, &mut lower, &mut upper) {
                assert_eq!(
                    (lower, upper),
                    (vec![0.0; len], vec![0.5; len]),
                    "untouched"
                );
                eprintln!("no AVX-512 on this machine: triangle_sums is not used");
                return;
            }
            for t in 0..len {
                let kernel = |s: usize| (-0.3 * (xs[s] - xs[t]).powi(2)).exp();
                let want_lower: f64 = (0..t).map(kernel).sum();
                let want_upper: f64 = 0.5 + (t + 1..len).map(kernel).sum::<f64>();
                for (got, want) in [(lower[t], want_lower), (upper[t], want_upper)] {
                    assert!(
                        (got - want).abs() <= 1e-13 * want.max(1.0),
                        "len {len}, t {t}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernel_rows_match_the_scalar_kernel() {
        let values: Vec<f64> = (0..37)
            .map(|i| ((i * 7919) % 31) as f64 * 0.37 - 4.0)
            .collect();
        for n_dims in [1, 3] {
            let n = values.len() / n_dims;
            let mut out = vec![0.0; n - 2];
            gaussian_kernel_row(&values, n_dims, 0.3, 1, n - 1, &mut out);
            for (i, &got) in out.iter().enumerate() {
                let sq: f64 = (0..n_dims)
                    .map(|j| (values[(1 + i) * n_dims + j] - values[(n - 1) * n_dims + j]).powi(2))
                    .sum();
                let want = (-0.3 * sq).exp();
                // The argument itself may round differently (−γ·d·d against
                // −γ·d²): one ulp of an argument a moves e^a by |a| ulp.
                let tolerance = 4.0 * f64::EPSILON * want * (1.0 + 0.3 * sq);
                assert!(
                    (got - want).abs() <= tolerance,
                    "{n_dims} dims, row {i}: {got} vs {want}"
                );
            }
        }
    }
}
