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


def nmse(columns: dict) -> float:
    """Normalised MSE: the error's energy over the target's (0 is perfect, 1 is predicting zeros)."""
    target = np.asarray(columns["target"], dtype=float)
    energy = float(np.sum(target**2))
    if energy == 0:
        raise ValueError("the targets are all zero: NMSE is undefined")
    return float(np.sum((np.asarray(columns["prediction"], dtype=float) - target) ** 2)) / energy


def average_precision(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """The mean of the precision at each positive, ranked by score (None without positives)."""
    if not positive.any():
        return None
    order = np.argsort(-scores, kind="stable")
    hits = positive[order].astype(float)
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float(np.sum(precision * hits) / hits.sum())


def mean_average_precision(columns: dict) -> float:
    """mAP over the classes of prob_<class>: one-vs-rest average precision, averaged over classes with a
    positive in the test set."""
    probabilities = _probabilities(columns)
    target = np.asarray(columns["target"]).astype(int)
    found = [average_precision(probabilities[:, k], target == k) for k in range(probabilities.shape[1])]
    found = [value for value in found if value is not None]
    if not found:
        raise ValueError("no class has a positive sample")
    return float(np.mean(found))


def _images(column, heights=None, widths=None) -> list[np.ndarray]:
    """Per-sample images from a list column (flattened; height/width columns, else square)."""
    images = []
    for index, flat in enumerate(column):
        values = np.asarray(flat, dtype=float)
        if values.ndim != 1 or values.size < 4:
            raise ValueError("needs image columns (a list of pixel values per sample)")
        if heights is not None and widths is not None:
            shape = (int(heights[index]), int(widths[index]))
        else:
            side = math.isqrt(values.size)
            if side * side != values.size:
                raise ValueError("non-square images need height and width columns")
            shape = (side, side)
        images.append(values.reshape(shape))
    return images


def _gaussian_blur(image: np.ndarray, sigma: float = 1.5, radius: int = 5) -> np.ndarray:
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    rows = np.apply_along_axis(lambda line: np.convolve(line, taps, mode="valid"), 1, image)
    return np.apply_along_axis(lambda line: np.convolve(line, taps, mode="valid"), 0, rows)


def ssim_of(a: np.ndarray, b: np.ndarray, peak: float = 1.0) -> float:
    """SSIM (Wang et al. 2004): 11×11 Gaussian window, σ 1.5, K1 0.01, K2 0.03, valid region."""
    if min(a.shape) < 11:
        raise ValueError("SSIM needs images of at least 11×11 pixels")
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    mu_a, mu_b = _gaussian_blur(a), _gaussian_blur(b)
    var_a = _gaussian_blur(a * a) - mu_a**2
    var_b = _gaussian_blur(b * b) - mu_b**2
    cov = _gaussian_blur(a * b) - mu_a * mu_b
    ssim_map = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return float(np.mean(ssim_map))


def ssim(columns: dict) -> float:
    sizes = (columns.get("height"), columns.get("width"))
    predictions, targets = _images(columns["prediction"], *sizes), _images(columns["target"], *sizes)
    return float(np.mean([ssim_of(p, t) for p, t in zip(predictions, targets, strict=True)]))


def per_sample(name: str) -> Callable[[dict], float]:
    """A metric only a model can compute (LPIPS needs its network): recomputed as the mean of the
    per-sample scores the results hold in a column of its name."""

    def compute(columns: dict) -> float:
        if name not in columns:
            raise ValueError(f"needs a per-sample {name} column")
        return float(np.mean(np.asarray(columns[name], dtype=float)))

    return compute


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
        Metric("nmse", DOWN, nmse),
        Metric("map", UP, mean_average_precision),
        Metric("ssim", UP, ssim),
        Metric("lpips", DOWN, per_sample("lpips")),
    ]
}


def lookup(name: str, extra: dict | None = None) -> Metric | None:
    """The metric a claimed name means: a project's own first, then the registry (any case: mAP, PSNR)."""
    extra = extra or {}
    return extra.get(name) or REGISTRY.get(name) or REGISTRY.get(name.lower())


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


def recompute(
    results_path, claimed: dict, tolerance: float, extra: dict | None = None
) -> tuple[list[Recomputed], list[str]]:
    """Every claimed metric recomputed (extra: the project's own metrics, by name); names nobody knows
    are warnings, not failures."""
    columns = load_columns(results_path)
    results, warnings = [], []
    for name, value in sorted(claimed.items()):
        metric = lookup(name, extra)
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
