"""Generate the reference fixtures of the `cpd` crate.

Writes crates/cpd/tests/fixtures/{search,ks,geometric}.json from seeded signals,
using ruptures 1.1.10, scipy 1.17.1 and numpy 2.3.5 (scripts/cpd/requirements.txt).
The Rust tests read the committed JSON; they never run Python.

    python3 -m venv /work/venv-cpd
    /work/venv-cpd/bin/pip install -r scripts/cpd/requirements.txt
    /work/venv-cpd/bin/python scripts/cpd/generate_fixtures.py
"""

import json
import math
import warnings
from pathlib import Path

import numpy as np
import ruptures as rpt
import scipy
from ruptures.base import BaseCost
from scipy import stats
from scipy.spatial.distance import pdist, squareform

warnings.filterwarnings("ignore")
assert rpt.__version__.lstrip("v") == "1.1.10", rpt.__version__
assert scipy.__version__ == "1.17.1", scipy.__version__

OUT = Path(__file__).resolve().parents[2] / "crates" / "cpd" / "tests" / "fixtures"


class CostRbfExact(BaseCost):
    """The Gaussian-kernel cost without ruptures' clipping of gamma*|x-y|^2."""

    model = "rbf_exact"
    min_size = 1

    def __init__(self, gamma):
        self.gamma = gamma

    def fit(self, signal):
        s = signal.reshape(-1, 1) if signal.ndim == 1 else signal
        self.gram = np.exp(-self.gamma * squareform(pdist(s, metric="sqeuclidean")))
        self.signal = s
        return self

    def error(self, start, end):
        sub = self.gram[start:end, start:end]
        return float(np.trace(sub) - sub.sum() / (end - start))


class CostNormalMle(BaseCost):
    """len * logdet(MLE covariance + 1e-6 I): ruptures' normal cost for a series,
    with the maximum-likelihood covariance for several columns too."""

    model = "normal_mle"
    min_size = 2

    def fit(self, signal):
        self.signal = signal.reshape(-1, 1) if signal.ndim == 1 else signal
        return self

    def error(self, start, end):
        sub = self.signal[start:end]
        cov = np.atleast_2d(np.cov(sub.T, bias=True)) + 1e-6 * np.eye(sub.shape[1])
        return float(np.linalg.slogdet(cov)[1] * (end - start))


def median_gamma(signal):
    s = signal.reshape(-1, 1) if signal.ndim == 1 else signal
    med = float(np.median(pdist(s, metric="sqeuclidean")))
    return 1.0 / med if med != 0 else 1.0


def make_cost(name, signal, gamma=None):
    if name == "rbf":
        return CostRbfExact(gamma).fit(signal)
    if name == "normal":
        return CostNormalMle().fit(signal)
    return rpt.costs.cost_factory(name).fit(signal)


def err(cost, start, end):
    """A segment cost as a float (ruptures' rank cost returns a 1 x 1 array)."""
    return float(np.asarray(cost.error(start, end)).reshape(-1)[0])


def objective(cost, bkps, pen=0.0):
    return sum(err(cost, s, e) for s, e in zip([0] + bkps[:-1], bkps)) + pen * (len(bkps) - 1)


def piecewise(rng, n, d, n_bkps, noise, kind="constant"):
    signal, bkps = rpt.pw_constant(n, d, n_bkps, noise_std=noise, seed=int(rng.integers(1 << 30)))
    if kind == "scale":
        signal = signal * (1 + 0.2 * rng.standard_normal(signal.shape))
    return signal


def exact_penalised(cost, signal, pen, min_size, jump):
    """The exact penalised optimum by optimal partitioning (no pruning):
    F(t) = min_s F(s) + c(s, t) + pen over admissible last changes s."""
    n = signal.shape[0]
    grid = [t for t in range(min_size, n - min_size + 1) if t % jump == 0]
    best = {0: (-pen, None)}
    for t in grid + [n]:
        options = [(best[s][0] + err(cost, s, t) + pen, s) for s in [0] + grid
                   if s in best and t - s >= min_size]
        best[t] = min(options)
    bkps, t = [], n
    while t:
        bkps.append(t)
        t = best[t][1]
    bkps = bkps[::-1]
    return objective(cost, bkps, pen), bkps


def search_cases(rng):
    cases = []

    def add(**case):
        case["signal"] = np.asarray(case["signal"]).reshape(len(case["signal"]), -1).tolist()
        cases.append(case)

    # The PELT bug of ruptures 1.1.10.
    sig = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    cost = make_cost("l2", sig)
    rb = rpt.Pelt(model="l2", min_size=2, jump=1).fit(sig).predict(pen=0.1)
    value, bkps = exact_penalised(cost, sig, 0.1, 2, 1)
    add(name="pelt_ruptures_bug", cost="l2", algo="pelt", signal=sig, min_size=2, jump=1, pen=0.1,
        expected_bkps=bkps, expected_objective=value, ruptures_bkps=rb,
        ruptures_objective=objective(cost, rb, 0.1), unique=True)

    configs = [
        ("l2", 1, 0.3, "constant"), ("l2", 3, 0.5, "constant"), ("l1", 1, 0.3, "constant"),
        ("normal", 1, 0.3, "scale"), ("normal", 2, 0.5, "scale"), ("rank", 1, 0.4, "constant"),
        ("rank", 2, 0.5, "constant"), ("rbf", 1, 0.3, "constant"), ("rbf", 2, 0.4, "constant"),
    ]
    for idx, (name, d, noise, kind) in enumerate(configs):
        for rep in range(2):
            n = int(rng.integers(40, 80))
            true_k = int(rng.integers(1, 4))
            sig = piecewise(rng, n, d, true_k, noise, kind)
            gamma = median_gamma(sig) if name == "rbf" else None
            cost = make_cost(name, sig, gamma)
            min_size = int(rng.integers(2, 5))
            jump = 1 if rep == 0 else int(rng.integers(2, 4))
            unique = name != "l1"
            common = dict(cost=name, signal=sig, min_size=min_size, jump=jump, gamma=gamma, unique=unique)
            tag = f"{name}_d{d}_{rep}"
            # Single change point: the best of all admissible splits, with its margin.
            splits = [t for t in range(0, n, jump) if t >= min_size and n - t >= min_size]
            values = sorted((err(cost, 0, t) + err(cost, t, n), t) for t in splits)
            margin = values[1][0] - values[0][0] if len(values) > 1 else math.inf
            add(name=f"single_{tag}", algo="single", expected_bkps=[values[0][1], n],
                expected_objective=values[0][0], **{**common, "unique": unique and margin > 1e-6})
            # Dynamic programming with several numbers of change points.
            for k in sorted({1, true_k, true_k + 1}):
                bkps = rpt.Dynp(custom_cost=cost, min_size=min_size, jump=jump).fit(sig).predict(n_bkps=k)
                add(name=f"dynp_{tag}_k{k}", algo="dynp", n_bkps=k, expected_bkps=bkps,
                    expected_objective=objective(cost, bkps), **common)
            # PELT: ruptures' answer and the exact optimum.
            scale = objective(cost, [n]) / n
            pen = float(abs(scale) * 3 + 1.0) if name != "rank" else 3.0
            rb = rpt.Pelt(custom_cost=cost, min_size=min_size, jump=jump).fit(sig).predict(pen=pen)
            value, bkps = exact_penalised(cost, sig, pen, min_size, jump)
            add(name=f"pelt_{tag}", algo="pelt", pen=pen, expected_bkps=bkps, expected_objective=value,
                ruptures_bkps=rb, ruptures_objective=objective(cost, rb, pen), **common)
            # Binary segmentation (jump 1: ruptures counts its jump from each segment start).
            if jump == 1:
                bkps = rpt.Binseg(custom_cost=cost, min_size=min_size, jump=1).fit(sig).predict(n_bkps=true_k)
                add(name=f"binseg_{tag}", algo="binseg", n_bkps=true_k, expected_bkps=bkps,
                    expected_objective=objective(cost, bkps), **common)
    # ruptures' C path (KernelCPD, linear kernel = l2) on a longer series.
    sig = piecewise(rng, 400, 1, 4, 0.4)
    cost = make_cost("l2", sig)
    for k in (1, 4):
        bkps = rpt.KernelCPD(kernel="linear", min_size=3).fit(sig).predict(n_bkps=k)
        add(name=f"kernelcpd_l2_k{k}", cost="l2", algo="dynp", signal=sig, min_size=3, jump=1,
            n_bkps=k, expected_bkps=bkps, expected_objective=objective(cost, bkps), gamma=None, unique=True)
    bkps = rpt.KernelCPD(kernel="linear", min_size=3).fit(sig).predict(pen=5.0)
    add(name="kernelcpd_l2_pelt", cost="l2", algo="pelt", signal=sig, min_size=3, jump=1, pen=5.0,
        expected_bkps=bkps, expected_objective=objective(cost, bkps, 5.0), gamma=None, unique=True)
    return cases


def ks_cases(rng):
    cases = []

    def add(name, x, y):
        x, y = np.asarray(x, float), np.asarray(y, float)
        res = stats.ks_2samp(x, y, method="auto")
        n, m = len(x), len(y)
        exact = max(n, m) <= 10000
        en = n * m / (n + m)
        cases.append(dict(
            name=name, x=x.tolist(), y=y.tolist(), statistic=float(res.statistic),
            p_value=float(res.pvalue), exact=exact,
            kolmogorov_asymptotic=float(stats.kstwobign.sf(math.sqrt(en) * res.statistic)),
        ))

    add("known_continuous",
        [0.95692026, 1.1348812, -0.76579239, -0.58065653, -0.05122393, 0.71598754, 1.39873528,
         0.42790527, 1.84580764, 0.64228521],
        [0.6948678, -0.3741825, 0.36657279, 1.15834174, -0.32421706, -0.38499295, 1.44976991,
         0.2504608, -0.53694774, 1.42221993])
    add("known_ties", np.arange(1, 11), np.arange(6, 21))
    sizes = [(5, 5), (7, 13), (20, 20), (30, 45), (64, 100), (100, 101), (250, 40), (500, 700), (999, 1000),
             (1500, 2500), (3, 200)]
    for i, (n, m) in enumerate(sizes):
        shift = [0.0, 0.3, 0.8][i % 3]
        add(f"normal_{n}_{m}", rng.standard_normal(n), rng.standard_normal(m) + shift)
        # Rounded data: many ties within and between the samples.
        add(f"ties_{n}_{m}", np.round(rng.standard_normal(n) * 2), np.round(rng.standard_normal(m) * 2 + shift))
    # Beyond the exact limit scipy (and cpd) use an asymptotic p-value.
    add("large_asymptotic", rng.standard_normal(10050), rng.standard_normal(60) + 0.3)
    return cases


def geometric_cases(rng):
    cases = []
    for i, (n, p) in enumerate([(12, 4), (30, 8)]):
        x = rng.standard_normal((n, p)) * 2 + 50
        x[n // 2:, : p // 2] += 10
        ref = np.ones(p) if i == 0 else rng.uniform(0.5, 2.0, p)
        y = x - x.min(axis=0) + ref
        distance = np.sqrt(((y - ref) ** 2).sum(axis=1))
        angle = np.arccos(np.clip(y @ ref / (np.linalg.norm(y, axis=1) * np.linalg.norm(ref)), -1, 1))
        cases.append(dict(name=f"geometric_{n}x{p}", samples=x.tolist(), reference=ref.tolist(),
                          distance=distance.tolist(), angle=angle.tolist()))
    return cases


def plain(value):
    """numpy scalars and containers as plain JSON values."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


def main():
    rng = np.random.default_rng(20240521)
    OUT.mkdir(parents=True, exist_ok=True)
    meta = dict(generator="scripts/cpd/generate_fixtures.py", ruptures=rpt.__version__,
                scipy=scipy.__version__, numpy=np.__version__, seed=20240521)
    for name, cases in [("search", search_cases(rng)), ("ks", ks_cases(rng)), ("geometric", geometric_cases(rng))]:
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(plain(dict(meta=meta, cases=cases)), separators=(",", ":")) + "\n")
        print(f"{path}: {len(cases)} cases, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
