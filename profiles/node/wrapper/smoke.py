"""`smoke`: run the command once on CPU with REMOTEGPU_SMOKE=1."""

import json
import os
import shutil
import subprocess
import time

from .attempts import run_env
from .environment import argv_in_environment


def cmd_smoke(spec):
    smoke_dir = os.path.join(spec["active"], "smoke")
    shutil.rmtree(smoke_dir, ignore_errors=True)
    os.makedirs(os.path.join(smoke_dir, "output"))
    started = time.time()
    try:
        done = subprocess.run(
            argv_in_environment(spec),
            cwd=spec["cwd"],
            env=run_env(spec, smoke=True),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=spec.get("smoke_timeout", 600),
        )
        code, output = done.returncode, done.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, output = 124, (exc.output or b"").decode(errors="replace") + "\n[smoke timed out]"
    except OSError as exc:
        code, output = 127, f"cannot start the command: {exc}"
    print(json.dumps({"exit_code": code, "output": output[-20000:], "seconds": round(time.time() - started, 2)}))
    return 0
