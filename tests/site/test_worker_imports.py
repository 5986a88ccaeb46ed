"""A worker carries only what it uses: loading every task module (what a Celery worker does at start)
imports no torch, numpy or pyarrow (a path helper once pulled them all in), nor does importing the
verifier; only loading a checkpoint does (torch's import is seconds of CPU per process)."""

import json
import subprocess
import sys

from tests.conftest import REPO, subprocess_env

PROBE = """
import json, resource, sys
import django
django.setup()
from remotegpu_site.celery import app
app.loader.import_default_modules()
heavy = sorted(name for name in ("torch", "numpy", "pyarrow") if name in sys.modules)
from custody import verify  # noqa: F401  (the verifying task's own import)
after_verify = "torch" in sys.modules
from custody.checkpoint import safe_load
safe_load("/nonexistent.pth")  # refused, but torch is imported to refuse it
print(json.dumps({"heavy": heavy, "after_verify": after_verify, "after_load": "torch" in sys.modules}))
"""


def test_loading_the_workers_tasks_imports_no_torch_numpy_or_pyarrow():
    answer = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert answer.returncode == 0, answer.stderr
    seen = json.loads(answer.stdout.strip().splitlines()[-1])
    assert seen == {"heavy": [], "after_verify": False, "after_load": True}  # the check can fail: a load imports it
