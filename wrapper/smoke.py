"""`smoke`: run the command once on CPU with REMOTEGPU_SMOKE=1."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time

from .attempts import run_env
from .declared import declared_paths, remove_smoke_files, smoke_argv
from .export import REQUIRED_EXPORT
from .hooks import drop_proxy_from_wrapper, make_cache
from .run_secrets import Masker, take_secrets


def cmd_smoke(spec):
    secrets = take_secrets(spec)  # only when the run asked for them in its smoke (the spec names them)
    drop_proxy_from_wrapper(spec)
    make_cache(spec)
    smoke_dir = os.path.join(spec.active, "smoke")
    shutil.rmtree(smoke_dir, ignore_errors=True)
    os.makedirs(os.path.join(smoke_dir, "output"))
    started = time.time()
    bound = spec.smoke_timeout
    before = declared_paths(spec)
    try:
        code, output = run_bounded(spec, secrets, bound)
    except OSError as exc:
        code, output = 127, f"cannot start the command: {exc}"
    left = remove_smoke_files(spec, before)
    masker = Masker(secrets.values())
    output = (masker.feed(output.encode()) + masker.close()).decode(errors="replace")
    seconds = round(time.time() - started, 2)
    warnings = smoke_warnings(os.path.join(smoke_dir, "output"))
    if left:
        warnings.append(
            "the smoke wrote the script's declared files ({}) in the source directory: removed, so the attempt "
            "starts afresh; a smoke that honours REMOTEGPU_SMOKE=1 writes nothing durable".format(", ".join(left[:5]))
        )
    print(json.dumps({"exit_code": code, "output": output[-20000:], "seconds": seconds, "warnings": warnings}))
    return 0


def smoke_warnings(output_dir):
    """A smoke that wrote the export's required files did its whole training: it ignores the flag."""
    wrote = [name for name in REQUIRED_EXPORT if os.path.isfile(os.path.join(output_dir, name))]
    if len(wrote) < len(REQUIRED_EXPORT):
        return []
    return [
        "the smoke wrote a whole export ({}) to $REMOTEGPU_OUTPUT_DIR: a smoke is 1-2 batches on CPU that "
        "writes nothing durable, so the command seems to ignore REMOTEGPU_SMOKE=1 (see docs/contract.md)".format(
            ", ".join(wrote)
        )
    ]


def ignored_smoke(bound):
    return (
        f"[the smoke ran past its bound of {bound} s and was stopped: a smoke is 1-2 batches on CPU, so the "
        "command seems to ignore REMOTEGPU_SMOKE=1 and ran its whole training (see docs/contract.md)]"
    )


def run_bounded(spec, secrets, bound):
    """(exit code, output) of the command under REMOTEGPU_SMOKE=1; past the bound its whole process group
    is killed (a data loader's workers too) and the output says why."""
    child = subprocess.Popen(
        smoke_argv(spec),
        cwd=spec.cwd,
        env=run_env(spec, smoke=True, secrets=secrets),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=bound)
        return child.returncode, output.decode(errors="replace")
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        return 124, output.decode(errors="replace") + "\n" + ignored_smoke(bound)
