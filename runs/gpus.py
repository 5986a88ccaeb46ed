"""Whether the GPUs a run asks for are really there, from its preflight report: pure.

A GPU is not there because the form says so: the run's own interpreter must see CUDA and each index,
and no process outside RemoteGPU may hold memory on one of them (an approver may waive that). Whether they
are still there at a (re)launch is the wrapper's rule (`gone_problem`), the same on the box's own relaunch."""

from runs.hardware import cuda_cause
from wrapper.gpus import gone_problem  # noqa: F401 (the one rule, used by the launch task)


def gpu_problems(
    requested: list[int], environment: dict, holders: dict | None, waived: bool = False, inventory=None
) -> list[str]:
    """Reasons to refuse the launch; none when the run asks for no GPU. inventory: what nvidia-smi
    measured (runs/hardware.py names a driver, toolkit or torch mismatch as the cause)."""
    if not requested:
        return []
    interpreter = environment.get("interpreter") or "the run's interpreter"
    problems = []
    if not environment.get("cuda_available"):
        torch = environment.get("torch") or "no torch"
        problems.append(
            f"CUDA is not available to {interpreter} ({torch}): it cannot use GPU {', '.join(map(str, requested))}. "
            "Pick an environment with a CUDA build of torch, or run on CPU (no GPUs)."
            + cuda_cause(environment, inventory)
        )
    else:
        count = environment.get("cuda_device_count") or 0
        missing = [gpu for gpu in requested if gpu >= count]
        if missing:
            problems.append(f"GPU {', '.join(map(str, missing))} does not exist: {interpreter} sees {count} GPU(s).")
    for holder in [] if waived else _holders(holders):
        memory = f", {holder['used_mib']} MiB" if holder.get("used_mib") is not None else ""
        problems.append(
            f"GPU {holder['index']} is in use by a process outside RemoteGPU (pid {holder['pid']}{memory}): "
            "free it, pick another GPU, or ask an approver to override."
        )
    return problems


def _holders(holders) -> list[dict]:
    """The box's list of foreign GPU processes, only entries of the expected shape, at most 32."""
    items = holders.get("holders") if isinstance(holders, dict) else None
    if not isinstance(items, list):
        return []
    valid = [
        h for h in items if isinstance(h, dict) and isinstance(h.get("index"), int) and isinstance(h.get("pid"), int)
    ]
    return [{**h, "used_mib": h["used_mib"] if isinstance(h.get("used_mib"), int) else None} for h in valid[:32]]
