"""Whether the GPUs a run asks for are really there, from its preflight report: pure.

A GPU is not there because the form says so: the run's own interpreter must see CUDA and each index,
and no process outside RemoteGPU may hold memory on one of them (an approver may waive that)."""


def gpu_problems(requested: list[int], environment: dict, holders: dict | None, waived: bool = False) -> list[str]:
    """Reasons to refuse the launch; none when the run asks for no GPU."""
    if not requested:
        return []
    interpreter = environment.get("interpreter") or "the run's interpreter"
    problems = []
    if not environment.get("cuda_available"):
        torch = environment.get("torch") or "no torch"
        problems.append(
            f"CUDA is not available to {interpreter} ({torch}): it cannot use GPU {', '.join(map(str, requested))}. "
            "Pick an environment with a CUDA build of torch, or run on CPU (no GPUs)."
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


def gone_problem(requested: list[int], now: dict | None, at_preflight: dict | None) -> str | None:
    """At a (re)launch: a requested GPU nvidia-smi no longer lists (a box back from a restart without
    its GPUs) fails the launch rather than running on CPU at the GPU rate. Without nvidia-smi now, only
    a box that had it at preflight is refused (something changed); one that never had it says nothing."""
    if not requested:
        return None
    if not isinstance(now, dict) or not now.get("nvidia_smi", True):
        if isinstance(at_preflight, dict):
            return "nvidia-smi answered at preflight and not now: the box lost its GPUs (a restart?); not run on CPU"
        return None
    listed = now.get("indices") if isinstance(now.get("indices"), list) else []
    gone = [gpu for gpu in requested if gpu not in listed]
    if gone:
        shown = ", ".join(map(str, listed)) or "none"
        return f"GPU {', '.join(map(str, gone))} is not on this box now (nvidia-smi lists {shown}): not run on CPU"
    return None
