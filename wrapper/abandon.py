"""`abandon`: quarantine an attempt that has no process and no exit marker."""

import json
import os
import shutil

from .attempts import attempt_dir
from .digits import ascii_int
from .export import quarantine
from .files import alive, read
from .status import rebooted


def cmd_abandon(spec, request):
    """The control side saw no process and no exit marker: quarantine the attempt as dead. A scheduler's
    job (request "scheduler": its final word) is dead on the scheduler's word: its processes ran on another
    node, so this node's process table says nothing of them."""
    attempt = attempt_dir(spec)
    said = str(request.get("scheduler") or "")[:300] if isinstance(request, dict) else ""
    pids = [ascii_int(pid) or 0 for pid in (read(os.path.join(attempt, "pid")) or "").split()]
    if not said and any(alive(pid) for pid in pids if pid > 0):
        print(json.dumps({"abandoned": False, "reason": "a process is alive"}))
        return 0
    if not os.path.isdir(attempt):
        print(json.dumps({"abandoned": False, "reason": "nothing to abandon"}))
        return 0
    code = read(os.path.join(attempt, "exit_code"))
    if code is not None:
        if os.path.isdir(spec.export):
            print(json.dumps({"abandoned": False, "reason": "sealed"}))
            return 0
        # The command exited but the wrapper died before sealing or quarantining (a full disk?).
        shutil.rmtree(spec.partial, ignore_errors=True)
        quarantine(spec, f"closeout never finished after exit code {code.strip()}: the wrapper died while sealing")
        print(json.dumps({"abandoned": True, "closeout": True}))
        return 0
    if said:
        quarantine(spec, f"dead: no exit marker, and the scheduler says {said}")
    elif rebooted(spec, attempt):
        quarantine(spec, "interrupted: no process, no exit marker, and the box rebooted or its container restarted")
    else:
        quarantine(spec, "dead: no process and no exit marker (wrapper killed, node rebooted or preempted)")
    print(json.dumps({"abandoned": True}))
    return 0
