"""`smoke`: run the command once on CPU with REMOTEGPU_SMOKE=1."""

import json
import os
import shutil
import subprocess
import time

from .attempts import run_env
from .environment import argv_in_environment
from .hooks import drop_proxy_from_wrapper, make_cache
from .run_secrets import Masker, take_secrets


def cmd_smoke(spec):
    secrets = take_secrets(spec)  # only when the run asked for them in its smoke (the spec names them)
    drop_proxy_from_wrapper(spec)
    make_cache(spec)
    smoke_dir = os.path.join(spec["active"], "smoke")
    shutil.rmtree(smoke_dir, ignore_errors=True)
    os.makedirs(os.path.join(smoke_dir, "output"))
    started = time.time()
    try:
        done = subprocess.run(
            argv_in_environment(spec),
            cwd=spec["cwd"],
            env=run_env(spec, smoke=True, secrets=secrets),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=spec.get("smoke_timeout", 600),
        )
        code, output = done.returncode, done.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        code, output = 124, (exc.output or b"").decode(errors="replace") + "\n[smoke timed out]"
    except OSError as exc:
        code, output = 127, f"cannot start the command: {exc}"
    masker = Masker(secrets.values())
    output = (masker.feed(output.encode()) + masker.close()).decode(errors="replace")
    print(json.dumps({"exit_code": code, "output": output[-20000:], "seconds": round(time.time() - started, 2)}))
    return 0
