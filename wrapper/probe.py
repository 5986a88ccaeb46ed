"""`probe`: the status of many runs in one round-trip (the watcher's tick)."""

import json
import time

from .gpus import gpu_utilization
from .specs import load_spec
from .status import run_status


def probe_answer(request):
    """Every live run of this node at once: the watcher's tick."""
    answers = {}
    for item in request["runs"]:
        try:
            spec = load_spec(item["spec"])
            answers[spec.run_id] = run_status(spec, item.get("log_offset", 0), item.get("csv_offset", 0))
        except (OSError, ValueError) as exc:
            answers[item.get("run_id", item["spec"])] = {"error": str(exc)}
    return {"now": time.time(), "gpus": gpu_utilization(), "runs": answers}


def cmd_probe(request):
    print(json.dumps(probe_answer(request)))
    return 0
