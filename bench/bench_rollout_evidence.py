"""The rollout's evidence checks, measured: the latency judge's false-positive rate on two identical
simulated backends and its power on a 10% slowdown; the A/B sample size against scipy.

    python bench/bench_rollout_evidence.py [--trials 2000]

Backends: lognormal latency (median 200 ms, sigma 0.5), bucketed as the proxy's histogram; the
judge compares the share over 500 ms with a 1-point margin at alpha 0.05. Counts, not times.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BOUNDS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0)


def simulate(rng, n: int, slowdown: float) -> dict[float, float]:
    import numpy as np

    latencies = np.sort(np.exp(rng.normal(math.log(0.2), 0.5, n)) * slowdown)
    counts = np.searchsorted(latencies, BOUNDS, side="right")
    return {**{b: float(c) for b, c in zip(BOUNDS, counts)}, math.inf: float(n)}


def judge_rates(trials: int, n: int, seed: int) -> tuple[float, float, float]:
    import numpy as np

    from opsctl.quality.latency_judge import judge

    rng = np.random.default_rng(seed)
    worse_same = equivalent_same = worse_slow = 0
    for _ in range(trials):
        same = judge(simulate(rng, n, 1.0), simulate(rng, n, 1.0), margin=0.01, alpha=0.05)
        worse_same += same.verdict == "worse"
        equivalent_same += same.verdict == "equivalent"
        worse_slow += judge(simulate(rng, n, 1.0), simulate(rng, n, 1.1), margin=0.01, alpha=0.05).verdict == "worse"
    return worse_same / trials, equivalent_same / trials, worse_slow / trials


def scipy_n(p: float, margin: float, alpha: float, power: float) -> int:
    from scipy.optimize import brentq
    from scipy.stats import norm

    def f(n):
        se = math.sqrt(2 * p * (1 - p) / n)
        return 2 * norm.cdf(margin / se - norm.ppf(1 - alpha)) - 1 - power

    return math.ceil(brentq(f, 2, 1e10))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2000)
    args = parser.parse_args()
    from opsctl.quality.abtest import sample_size

    print(f"latency judge, share over 500 ms, margin 1 point, alpha 0.05, {args.trials} trials each")
    print("| requests per backend | P(worse), identical | P(equivalent), identical | P(worse), 10% slower |")
    print("|---|---|---|---|")
    for n in (2_000, 5_000, 20_000):
        fp, eq, power = judge_rates(args.trials, n, 20261102 + n)
        print(f"| {n:,} | {fp:.4f} | {eq:.4f} | {power:.4f} |")
    print()
    print("| baseline | margin | alpha | power | opsctl n per arm | scipy n per arm | closed form |")
    print("|---|---|---|---|---|---|---|")
    from statistics import NormalDist

    z = NormalDist().inv_cdf
    for p, m, a, pw in ((0.32, 0.01, 0.05, 0.8), (0.30, 0.005, 0.05, 0.9), (0.05, 0.002, 0.025, 0.8)):
        ours = sample_size(p, m, alpha=a, power=pw).per_arm
        closed = (z(1 - a) + z(1 - (1 - pw) / 2)) ** 2 * 2 * p * (1 - p) / m ** 2
        print(f"| {p} | {m} | {a} | {pw} | {ours:,} | {scipy_n(p, m, a, pw):,} | {closed:,.0f} |")


if __name__ == "__main__":
    main()
