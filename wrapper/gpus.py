"""`gpus`: what nvidia-smi reports, and which GPU processes are not ours."""

import json
import os
import re
import shutil
import subprocess

from .digits import ascii_int
from .files import read


def cmd_gpus(spec):
    """At every (re)launch: which GPUs nvidia-smi lists now, and who holds the requested ones (a box
    back from a restart may have come back without its GPUs: RunPod)."""
    print(json.dumps({"gpus": gpus_now(spec)}))
    return 0


def gpus_now(spec):
    holders = gpu_holders(spec)
    return {"nvidia_smi": holders is not None, **(holders or {})}


def relaunch_problem(spec):
    """Why the attempt of spec may not start again on this box now (gone_problem), or None."""
    if not spec.gpus:
        return None
    return gone_problem(spec.gpus, gpus_now(spec), spec.gpus_at_preflight)


def our_pids(spec):
    """The pids of every RemoteGPU attempt on this box (wrapper and child), from their pid files."""
    pids = set()
    root = os.path.dirname(spec.run_root.rstrip("/"))
    for project in os.listdir(root) if os.path.isdir(root) else []:
        active = os.path.join(root, project, "active")
        for run in os.listdir(active) if os.path.isdir(active) else []:
            base = os.path.join(active, run)
            for name in os.listdir(base) if os.path.isdir(base) else []:
                pids.update(
                    p for p in map(ascii_int, (read(os.path.join(base, name, "pid")) or "").split()) if p is not None
                )
    return pids


def descends_from(pid, ancestors):
    """pid is one of ancestors or their descendant (a DataLoader worker of our child holds GPU memory too)."""
    for _ in range(64):
        if pid in ancestors:
            return True
        fields = (read(f"/proc/{pid}/stat") or ")").rsplit(")", 1)[1].split()
        pid = ascii_int(fields[1]) if len(fields) >= 2 else None
        if pid is None or pid <= 1:
            return False
    return False


def gpu_holders(spec):
    """What nvidia-smi says of the requested GPUs: which exist, and the compute processes on them that
    are not RemoteGPU's (a foreign job's memory, a notebook left open). None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None

    def query(what):
        done = subprocess.run(
            ["nvidia-smi", "--query-" + what, "--format=csv,noheader,nounits"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=20,
        )
        return [
            [cell.strip() for cell in line.split(",")] for line in done.stdout.decode().splitlines() if line.strip()
        ]

    try:
        gpus = {
            row[1]: ascii_int(row[0])
            for row in query("gpu=index,uuid")
            if len(row) == 2 and ascii_int(row[0]) is not None
        }
        apps = [row for row in query("compute-apps=pid,gpu_uuid,used_memory") if len(row) == 3 and ascii_int(row[0])]
    except (OSError, subprocess.TimeoutExpired):
        return None
    ours = our_pids(spec)
    holders = []
    for pid, uuid, used in apps[:256]:
        index = gpus.get(uuid)
        if index in spec.gpus and not descends_from(ascii_int(pid), ours):
            holders.append({"index": index, "pid": ascii_int(pid), "used_mib": ascii_int(used)})
    return {"indices": sorted(gpus.values()), "holders": holders}


def nvidia_smi(args, timeout):
    """nvidia-smi's output with args, or None (absent, failed to start, too slow)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode(errors="replace")


def gpu_utilization():
    out = nvidia_smi(["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"], 5)
    if out is None:
        return None
    rows = [[ascii_int(cell.strip()) for cell in line.split(",")] for line in out.splitlines() if line.count(",") == 2]
    return [{"index": i, "utilization_pct": u, "memory_used_mib": m} for i, u, m in rows if None not in (i, u, m)]


def gpu_inventory():
    """What the box has, as nvidia-smi says at preflight: each GPU's model and memory, the driver, and
    the highest CUDA the driver supports (its banner). None without nvidia-smi."""
    listed = nvidia_smi(["--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader,nounits"], 20)
    if listed is None:
        return None
    banner = nvidia_smi([], 20)
    gpus, driver = [], ""
    for line in listed.splitlines()[:64]:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == 4 and ascii_int(cells[0]) is not None and ascii_int(cells[2]) is not None:
            gpus.append({"index": ascii_int(cells[0]), "name": cells[1][:100], "memory_mib": ascii_int(cells[2])})
            driver = cells[3][:40]
    found = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", banner or "")
    return {"gpus": gpus, "driver": driver, "cuda": found.group(1) if found else ""}


def gone_problem(requested, now, at_preflight):
    """At a (re)launch: a requested GPU nvidia-smi no longer lists (a box back from a restart without
    its GPUs) fails the launch rather than running on CPU at the GPU rate. Without nvidia-smi now, only
    a box that had it at preflight is refused (something changed); one that never had it says nothing.
    The one rule for every relaunch: the launch task's and the box's own after a restart (boot-resume)."""
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
