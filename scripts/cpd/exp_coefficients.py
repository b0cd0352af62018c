"""Derives the constants of cpd's AVX-512 exponential (crates/cpd/src/cost/kernel_row.rs, mod avx512).

e^x = 2^m * 2^(j/16) * e^y with x = (16 m + j) ln2/16 + y, |y| <= ln2/32:

* C: e^y - 1 ~ sum_{i=1..6} C[i-1] y^i, the equal-ripple fit through the 7
  Chebyshev extrema of the interval (the first step of Remez' exchange), whose
  absolute error is below 1.4e-17 on the interval (printed);
* TABLE: 2^(j/16) rounded to double, j = 0..15;
* LN2_HI / LN2_LO: ln 2 split with 38 significant bits in the high part.

Needs mpmath (`pip install mpmath`); prints the constants as Rust literals.
"""

import math

import mpmath as mp

mp.mp.dps = 50
DEGREE = 6
HALF_WIDTH = mp.log(2) / 32 * (1 + mp.mpf("1e-6"))


def fit():
    points = [HALF_WIDTH * mp.cos(mp.pi * (DEGREE - i) / DEGREE) for i in range(DEGREE + 1)]
    a = mp.matrix(DEGREE + 1, DEGREE + 1)
    b = mp.matrix(DEGREE + 1, 1)
    for r, y in enumerate(points):
        for i in range(DEGREE):
            a[r, i] = y ** (i + 1)
        a[r, DEGREE] = (-1) ** r
        b[r] = mp.expm1(y)
    solution = mp.lu_solve(a, b)
    return [solution[i] for i in range(DEGREE)]


def main():
    coefficients = [float(c) for c in fit()]
    grid = [-HALF_WIDTH + 2 * HALF_WIDTH * k / 4000 for k in range(4001)]
    error = max(abs(mp.expm1(y) - sum(mp.mpf(c) * y ** (i + 1) for i, c in enumerate(coefficients)))
                for y in grid)
    print(f"// max |e^y - 1 - p(y)| on |y| <= ln2/32: {mp.nstr(error, 3)}")
    print("const C: [f64; 6] = [" + ", ".join(repr(c) for c in coefficients) + "];")
    print("const TABLE: [f64; 16] = [" + ", ".join(repr(float(mp.power(2, mp.mpf(j) / 16))) for j in range(16)) + "];")
    ln2 = mp.log(2)
    mantissa, exponent = math.frexp(float(ln2))
    hi = math.ldexp(math.floor(mantissa * 2**38) / 2**38, exponent)
    print(f"const LN2_HI: f64 = {hi!r};")
    print(f"const LN2_LO: f64 = {float(ln2 - mp.mpf(hi))!r};")


if __name__ == "__main__":
    main()
