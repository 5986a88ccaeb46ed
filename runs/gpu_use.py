"""A run's GPU use as a fact: what nvidia-smi says of the run's own GPUs at a watcher tick, read as
untrusted box input (bounded, typed), and whether the run is idle by its project's threshold. Pure: no
database, no clock (watching/gpu_samples.py keeps the samples and the idle streak).

A run is idle when every GPU it asked for is under the threshold: a data loader starving one GPU of
eight is a slow run, not an idle one. A tick where nvidia-smi does not answer, or lists none of the
run's GPUs, measures nothing and changes nothing: idleness is never concluded from silence.
"""

from datetime import timedelta

MAX_GPUS = 64


def _whole(value, low: int, high: int) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high else None


def read_sample(answer, requested: list[int]) -> list[dict] | None:
    """The run's GPUs from a probe's `gpus` answer, or None when it says nothing of them."""
    if not isinstance(answer, list) or not requested:
        return None
    rows = {}
    for item in answer[:MAX_GPUS]:
        if not isinstance(item, dict):
            continue
        index = _whole(item.get("index"), 0, MAX_GPUS)
        used = _whole(item.get("utilization_pct"), 0, 100)
        memory = _whole(item.get("memory_used_mib"), 0, 10**7)
        if index in requested and used is not None and memory is not None:
            rows[index] = {"index": index, "utilization_pct": used, "memory_used_mib": memory}
    return [rows[index] for index in sorted(rows)] or None


def is_idle(sample: list[dict], threshold_pct: int) -> bool:
    """Every measured GPU of the run under the threshold (a threshold of 0 never calls a run idle)."""
    return threshold_pct > 0 and all(gpu["utilization_pct"] < threshold_pct for gpu in sample)


def sample_due(run, sample_seconds: float, now) -> bool:
    """A sample is kept at most every sample_seconds."""
    return run.gpu_sampled_at is None or (now - run.gpu_sampled_at).total_seconds() >= sample_seconds


def streak_flips(run, sample: list[dict]) -> bool:
    """The reading starts an idle streak or ends one."""
    return is_idle(sample, run.project.gpu_idle_percent) != (run.gpu_idle_since is not None)


def worth_writing(run, answer, sample_seconds: float, now) -> bool:
    """Whether this tick's reading changes anything of the run as the tick read it: a sample due, or the
    idle streak starting or ending. Most ticks change nothing and take no lock (500 runs, a tick each 5 s).
    A Slurm run's probe answers from the login node, whose nvidia-smi says nothing of the job's GPUs on
    a compute node: never read as the run's."""
    if run.instance.profile.runs_jobs:
        return False
    sample = read_sample(answer, run.gpus)
    return sample is not None and (sample_due(run, sample_seconds, now) or streak_flips(run, sample))


def plot_rows(samples, started) -> list[dict]:
    """The run page's chart rows: minutes since the first sample, and per GPU its % and GiB."""
    rows = []
    for at, gpus in samples:
        row = {"minutes": round((at - started).total_seconds() / 60, 2)}
        for gpu in gpus:
            row[f"GPU {gpu['index']} utilisation %"] = gpu["utilization_pct"]
            row[f"GPU {gpu['index']} memory GiB"] = round(gpu["memory_used_mib"] / 1024, 2)
        rows.append(row)
    return rows


def idle_past_window(runs, now) -> list:
    """The live runs whose every GPU has idled past their project's window at now: what its alarm says."""
    return [
        run
        for run in runs
        if run.gpu_idle_since and now - run.gpu_idle_since >= timedelta(minutes=run.project.gpu_idle_minutes)
    ]
