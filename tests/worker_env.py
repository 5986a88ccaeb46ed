"""Loaded before Django's settings (`-p tests.worker_env` in pytest's addopts).

Under pytest-xdist each worker process gets its own Redis database (cache, channel layer, broker),
its own Celery queue, its own var/ directory and its own data root on the loopback box, so parallel
workers never take each other's tasks, hear each other's groups, or see each other's runs in a
shutdown's idle check or a boot marker. pytest-django already gives each worker its own test
database, and each worker starts its own sshd, Celery worker and provider stub (session fixtures).
"""

import os
import re
from pathlib import Path

LONELY_REDIS_DB = 2  # a Redis database no test worker and no dev stack uses

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
INDEX = int(WORKER.removeprefix("gw")) if WORKER else 0

if WORKER:
    if INDEX > 11:
        raise RuntimeError("at most 12 xdist workers: each takes one Redis database counting down from 15 to 4")
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    base = int(m.group(1)) if (m := re.search(r"/(\d+)$", url)) else 15
    os.environ["REDIS_URL"] = re.sub(r"(/\d+)?$", f"/{max(base - INDEX, 0)}", url, count=1)
    os.environ["CELERY_QUEUE"] = f"{os.environ.get('CELERY_QUEUE', 'remotegpu-test')}-{WORKER}"
    # Sources, custody copies and the secret key file: tests reuse project slugs and run ids.
    var = Path(os.environ.get("REMOTEGPU_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    os.environ["REMOTEGPU_VAR_DIR"] = str(var / f"test-{WORKER}")
    os.environ.pop("REMOTEGPU_CUSTODY_ROOT", None)
    os.environ.pop("REMOTEGPU_CKPT_ROOT", None)

# A release is gone on two of the provider's reads this far apart (10 s in a deployment): the provider
# stubs answer at once, and four executions of test_teardown_rules alone waited 40 s for it. Set before
# Django's settings load, as a deployment sets it; stacks and workers the tests start inherit it.
os.environ.setdefault("TEARDOWN_GONE_CONFIRM_SECONDS", "0.5")

# The data root of every run on the loopback box (as the box spells it, and as this machine sees it).
NODE_ROOT = f"$HOME/proj-{WORKER}" if WORKER else "$HOME/proj"
NODE_ROOT_PATH = os.path.expanduser(NODE_ROOT.replace("$HOME", "~", 1))
