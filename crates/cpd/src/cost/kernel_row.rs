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
