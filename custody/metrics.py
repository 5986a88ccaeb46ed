"""The metric registry: recompute every reported number from the full prediction population.

Pure: reads a results.parquet (one row per sample: target, prediction and, for classifiers,
prob_<class> columns) and knows nothing of Django. Each metric states its direction.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

UP, DOWN = "↑", "↓"


@dataclass(frozen=True)
class Metric:
    name: str
    direction: str
    compute: Callable[[dict], float]


def _probabilities(columns: dict) -> np.ndarray:
    names = sorted((name for name in columns if name.startswith("prob_")), key=lambda n: int(n.split("_", 1)[1]))
    if not names:
        raise ValueError("needs prob_<class> columns")
    return np.stack([columns[name] for name in names], axis=1)


def accuracy(columns: dict) -> float:
    return float(np.mean(columns["prediction"] == columns["target"]))


def top_k(k: int) -> Callable[[dict], float]:
    def compute(columns: dict) -> float:
        ranked = np.argsort(-_probabilities(columns), axis=1)[:, :k]
        return float(np.mean(np.any(ranked == columns["target"][:, None], axis=1)))

    return compute


def cross_entropy(columns: dict) -> float:
    probabilities = _probabilities(columns)
    picked = probabilities[np.arange(len(probabilities)), columns["target"].astype(int)]
    return float(-np.mean(np.log(np.clip(picked, 1e-12, 1.0))))


def mse(columns: dict) -> float:
    return float(np.mean((columns["prediction"] - columns["target"]) ** 2))


def mae(columns: dict) -> float:
    return float(np.mean(np.abs(columns["prediction"] - columns["target"])))


def rmse(columns: dict) -> float:
    return math.sqrt(mse(columns))


def psnr(columns: dict, peak: float = 1.0) -> float:
    error = mse(columns)
    return math.inf if error == 0 else 10 * math.log10(peak**2 / error)


REGISTRY = {
    metric.name: metric
    for metric in [
        Metric("accuracy", UP, accuracy),
        Metric("top1", UP, top_k(1)),
        Metric("top5", UP, top_k(5)),
        Metric("loss", DOWN, cross_entropy),
        Metric("cross_entropy", DOWN, cross_entropy),
        Metric("mse", DOWN, mse),
        Metric("mae", DOWN, mae),
        Metric("rmse", DOWN, rmse),
        Metric("psnr", UP, psnr),
    ]
}


@dataclass(frozen=True)
class Recomputed:
    name: str
    direction: str
    claimed: float
    recomputed: float
    delta: float
    within_tolerance: bool


def load_columns(path) -> dict:
    table = pq.read_table(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def recompute(results_path, claimed: dict, tolerance: float) -> tuple[list[Recomputed], list[str]]:
    """Every claimed metric recomputed; names the registry does not know are warnings, not failures."""
    columns = load_columns(results_path)
    results, warnings = [], []
    for name, value in sorted(claimed.items()):
        metric = REGISTRY.get(name)
        if metric is None:
            warnings.append(f"unknown metric {name!r}: not recomputed")
            continue
        try:
            fresh = metric.compute(columns)
        except (KeyError, ValueError) as exc:
            warnings.append(f"{name}: cannot recompute from the results ({exc})")
            continue
        delta = fresh - float(value)
        ok = math.isclose(fresh, float(value), rel_tol=tolerance, abs_tol=tolerance)
        results.append(Recomputed(name, metric.direction, float(value), fresh, delta, ok))
    return results, warnings
