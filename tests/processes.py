"""A run's processes on this machine, read from /proc: the test boxes and cluster nodes all share it, so a
test can find a node's launcher or worker, kill or freeze it, and check that nothing of the run is left."""

import os
from pathlib import Path


def of_run(run_id: str) -> list[tuple[int, dict]]:
    """The processes an attempt of the run started (they carry the attempt's mark), with their environment."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        environ = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        if environ.get("REMOTEGPU_RUN_ID") == run_id and "REMOTEGPU_ATTEMPT_TREE" in environ:
            found.append((int(name), environ))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def workers(run) -> dict[int, int]:
    """rank → pid of each training worker (torchrun sets RANK in its workers only)."""
    return {int(env["RANK"]): pid for pid, env in of_run(run.run_id) if "RANK" in env and "train.py" in cmdline(pid)}
