#!/usr/bin/env python
"""An idle Celery worker's memory: as it starts today (its tasks load no torch, numpy or pyarrow),
beside the same worker made to load custody.verify at start (the baseline: what every worker once
carried because a path helper lived beside the verifier). Goal: ≤ 150 MiB.

    .venv/bin/python bench/worker_memory_bench.py
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def idle_worker_rss(include: str = "", settle: float = 5.0) -> float:
    """Start one worker on a queue of its own, wait until it answers a ping and settles; its RSS."""
    from remotegpu_site.celery import app

    name = f"membench-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "celery", "-A", "remotegpu_site", "worker", "--pool=threads", "-c", "6"]
    command += ["-Q", name, "-n", f"{name}@%h", "-l", "warning"] + (["--include", include] if include else [])
    with tempfile.TemporaryFile() as log:
        worker = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 90
            while not app.control.ping(destination=[f"{name}@{os.uname().nodename}"], timeout=1):
                if time.monotonic() > deadline or worker.poll() is not None:
                    log.seek(0)
                    raise SystemExit(f"worker did not answer: {log.read().decode()[-2000:]}")
            time.sleep(settle)
            return rss_mib(worker.pid)
        finally:
            worker.terminate()
            worker.wait(timeout=30)


def main():
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "remotegpu_site.settings")
    django.setup()
    ours = idle_worker_rss()
    baseline = idle_worker_rss(include="custody.verify")
    report = {"bench": "worker_memory", "idle_worker_rss_mib": round(ours, 1), "baseline_rss_mib": round(baseline, 1)}
    print(f"idle worker RSS: {ours:.0f} MiB; loading the verifier at start: {baseline:.0f} MiB (goal ≤ 150 MiB)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
