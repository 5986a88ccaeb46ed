"""Seed and determinism as identity: what run.json says the run used, validated and bounded. Pure.

run.json may say `"seed": 7`, `"seeds": {"torch": 7, "data": 3}` (or a list), and
`"determinism": {"cudnn_deterministic": true, "cudnn_benchmark": false,
"use_deterministic_algorithms": true, "cublas_workspace_config": ":4096:8"}`. A bare
`"deterministic": true` is a claim without its settings. What is missing is a warning: a result
without its seed cannot be told apart from noise, and one without its determinism settings cannot be
re-run to the same numbers.
"""

FLAGS = ("cudnn_deterministic", "cudnn_benchmark", "use_deterministic_algorithms")
TEXT = ("cublas_workspace_config",)
LIMIT = 20  # seeds kept


def _seed(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def seeds_of(run: dict) -> dict[str, int]:
    found = {}
    if _seed(run.get("seed")) is not None:
        found["seed"] = run["seed"]
    many = run.get("seeds")
    if isinstance(many, dict):
        found.update({str(key)[:40]: value for key, value in many.items() if _seed(value) is not None})
    elif isinstance(many, list):
        found.update({f"seed{index}": value for index, value in enumerate(many) if _seed(value) is not None})
    return dict(list(found.items())[:LIMIT])


def determinism_of(run: dict) -> dict:
    settings = run.get("determinism")
    found = {}
    if isinstance(settings, dict):
        found.update({key: settings[key] for key in FLAGS if isinstance(settings.get(key), bool)})
        found.update({key: str(settings[key])[:40] for key in TEXT if isinstance(settings.get(key), str)})
    if run.get("deterministic") is True and not found:
        found["declared"] = True
    return found


def reproducibility(run: dict) -> tuple[dict, list[str]]:
    """({"seeds", "determinism"}, warnings) of a run.json."""
    seeds, settings = seeds_of(run), determinism_of(run)
    warnings = []
    if not seeds:
        warnings.append("run.json records no seed: replicates cannot be told apart from noise")
    if not settings:
        warnings.append(
            "run.json records no determinism settings (cudnn deterministic/benchmark, "
            "use_deterministic_algorithms, CUBLAS_WORKSPACE_CONFIG)"
        )
    elif settings.get("declared"):
        warnings.append("run.json says deterministic without its settings: which ones were set is unknown")
    elif settings.get("cudnn_benchmark") is True:
        warnings.append("cudnn.benchmark was on: convolution algorithms may differ from run to run")
    if settings.get("use_deterministic_algorithms") is True and "cublas_workspace_config" not in settings:
        warnings.append("deterministic algorithms without CUBLAS_WORKSPACE_CONFIG: cuBLAS on CUDA ≥ 10.2 is not")
    return {"seeds": seeds, "determinism": settings}, warnings
