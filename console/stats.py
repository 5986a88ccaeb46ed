"""Replicates of one configuration and what a difference between two of them can claim. Pure.

A group's metric is the mean over its seeds with the sample standard deviation and a 95% interval
(Student's t). A difference between two groups is an **effect** when the 95% interval of the
difference of means (Welch: unequal spreads, Welch–Satterthwaite degrees of freedom) excludes zero,
**noise** when it includes zero, and **unknown** when either side has fewer than two seeds: with one
seed the spread, and so the noise, is not known.
"""

import math
import statistics
from dataclasses import dataclass

RULE = (
    "effect: the 95% interval of the difference of means (Welch's t) excludes 0; noise: it includes 0; "
    "unknown: a side has fewer than two seeds, so its spread is not known; unfair: the two differ in test "
    "population, selection rule, evaluation code or training budget, so no difference between them is an effect"
)

# Student's t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom; beyond, the normal's.
T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip
Z975 = 1.960


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with df degrees of freedom (fractional df interpolated)."""
    if df < 1:
        return T975[0]
    if df >= len(T975):
        # Between 30 and infinity t falls from 2.042 to 1.960 roughly as 1/df.
        return Z975 + (T975[-1] - Z975) * len(T975) / df
    low = int(df)
    high = min(low + 1, len(T975))
    fraction = df - low
    return T975[low - 1] + (T975[high - 1] - T975[low - 1]) * fraction


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    sd: float | None  # None with one value
    half: float | None  # half-width of the 95% interval of the mean

    @property
    def low(self) -> float | None:
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        return None if self.half is None else self.mean + self.half


def summary(values: list[float]) -> Summary | None:
    finite = [float(value) for value in values if isinstance(value, int | float) and math.isfinite(value)]
    if not finite:
        return None
    mean = statistics.fmean(finite)
    if len(finite) < 2:
        return Summary(1, mean, None, None)
    sd = statistics.stdev(finite)
    return Summary(len(finite), mean, sd, t975(len(finite) - 1) * sd / math.sqrt(len(finite)))


@dataclass(frozen=True)
class Verdict:
    label: str  # effect, noise, unknown
    delta: float
    half: float | None  # half-width of the 95% interval of the difference
    better: bool | None  # the second group better by the metric's direction (None: no direction, or no change)


def verdict(a: Summary, b: Summary, direction: str | None) -> Verdict:
    """What the difference b − a can claim (see RULE)."""
    delta = b.mean - a.mean
    better = None if not direction or delta == 0 else (delta > 0) == (direction == "↑")
    if a.sd is None or b.sd is None:
        return Verdict("unknown", delta, None, better)
    va, vb = a.sd**2 / a.n, b.sd**2 / b.n
    se = math.sqrt(va + vb)
    if se == 0:  # every seed agrees on each side: any difference is beyond the spread
        return Verdict("effect" if delta else "noise", delta, 0.0, better)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    half = t975(df) * se
    return Verdict("effect" if abs(delta) > half else "noise", delta, half, better)
