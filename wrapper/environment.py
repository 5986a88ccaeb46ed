"""Which interpreter runs the command, and what the box is: boot identity, write speed, conda and venvs."""

import json
import os
import shutil
import subprocess
import sys
import time

from .files import expand, read, sha256_file
from .hooks import hook_interpreter


def boot_identity(spec):
    """What changes when the box reboots or the container restarts: the kernel's boot id, the start
    time of PID 1, and a marker the platform's start hook rewrites (vast.ai `onstart`)."""
    fields = (read("/proc/1/stat") or ")").rsplit(")", 1)[1].split()
    pid1_start = fields[19] if len(fields) > 19 else ""  # starttime, the 22nd field of /proc/<pid>/stat
    marker = (read(spec.boot_marker) or "") if spec.boot_marker else ""
    return "|".join([read("/proc/sys/kernel/random/boot_id") or "", pid1_start, marker])


def write_speed(root, size=32 << 20):
    """Measured sequential write of `size` bytes with fsync under root, in bytes per second."""
    os.makedirs(root, exist_ok=True)
    # One file per preflight: two runs of a project preflighting at once removed each other's probe.
    path = os.path.join(root, f".remotegpu-write-probe-{os.getpid()}")
    block = os.urandom(1 << 20)
    started = time.time()
    with open(path, "wb") as handle:
        for _ in range(size >> 20):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())
    elapsed = max(time.time() - started, 1e-6)
    os.remove(path)
    return int(size / elapsed)


# The run's interpreter reports itself and its torch. Importing torch costs about a second of CPU and
# only CUDA needs it: a run that asks for GPUs has torch imported and asked what it sees; a run that
# asks for none gets torch's version and CUDA build read from the installed torch/version.py (the same
# strings torch reports), and its smoke imports torch soon after anyway. An install laid out otherwise
# is imported as before.
IDENTITY_SCRIPT = (
    "import json, os, sys\n"
    "info = {'sys_executable': sys.executable, 'python': sys.version.split()[0], 'prefix': sys.prefix}\n"
    "def imported():\n"
    "    import torch\n"
    "    found = {'torch': torch.__version__, 'cuda': torch.version.cuda}\n"
    "    found['cuda_available'] = torch.cuda.is_available()\n"
    "    found['cuda_device_count'] = torch.cuda.device_count() if found['cuda_available'] else 0\n"
    "    found['gpu_names'] = [torch.cuda.get_device_name(i) for i in range(found['cuda_device_count'])]\n"
    "    return found\n"
    "def installed():\n"
    "    import importlib.util\n"
    "    spec = importlib.util.find_spec('torch')\n"
    "    if spec is None:\n"
    "        raise ModuleNotFoundError(\"No module named 'torch'\")\n"
    "    names = {}\n"
    "    try:\n"
    "        with open(os.path.join(os.path.dirname(spec.origin), 'version.py')) as handle:\n"
    "            exec(handle.read(), names)\n"
    "    except Exception:\n"
    "        return imported()\n"
    "    if not isinstance(names.get('__version__'), str):\n"
    "        return imported()\n"
    "    cuda = names.get('cuda')\n"
    "    cuda = cuda if isinstance(cuda, str) else None\n"
    "    return {'torch': names['__version__'], 'cuda': cuda, 'cuda_checked': False}\n"
    "def packages():\n"
    "    import hashlib, importlib.metadata as md\n"
    "    names = sorted({(d.metadata['Name'] or '?').lower().replace('_', '-') + '==' + str(d.version)\n"
    "                    for d in md.distributions()})\n"
    "    return {'packages_sha256': hashlib.sha256('\\n'.join(names).encode()).hexdigest(), 'packages': len(names)}\n"
    "try:\n"
    "    info.update(imported() if '--cuda' in sys.argv else installed())\n"
    "except Exception as exc:\n"
    "    info.update(torch=None, torch_error=type(exc).__name__)\n"
    "try:\n"
    "    info.update(packages())\n"
    "except Exception as exc:\n"
    "    info.update(packages_error=type(exc).__name__)\n"
    "print(json.dumps(info))\n"
)
# The environment as an identity: every installed distribution and its version, hashed (what `pip
# freeze` would list), and the run's lock file where its source has one.
LOCK_FILES = ("uv.lock", "poetry.lock", "pdm.lock", "requirements.lock", "conda-lock.yml", "environment.lock.yml")


def lock_file(src):
    """(name, SHA-256) of the first lock file at the top of the source, or (None, None)."""
    for name in LOCK_FILES:
        path = os.path.join(src, name)
        if os.path.isfile(path):
            return name, sha256_file(path)
    return None, None


CONDA_ROOTS = ("~/miniconda3", "~/anaconda3", "~/miniforge3", "/opt/conda", "/root/miniconda3")


VENV_DIRS = ("~/.venvs", "~/venvs", "~/.virtualenvs")


def conda_envs():
    """{name: prefix} of every conda env on the box ("base" is the root), without creating any."""
    envs = {}
    conda = shutil.which("conda")
    if conda:  # conda's own answer first: it knows envs created outside <root>/envs
        try:
            done = subprocess.run([conda, "env", "list", "--json"], stdout=subprocess.PIPE, timeout=60)
            for prefix in json.loads(done.stdout.decode() or "{}").get("envs", []):
                name = os.path.basename(prefix) if os.path.basename(os.path.dirname(prefix)) == "envs" else "base"
                envs.setdefault(name, prefix)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass  # the directories below still tell
    roots = [os.path.dirname(os.path.dirname(os.path.realpath(conda)))] if conda else []
    roots += [expand(root) for root in CONDA_ROOTS]
    for root in roots:
        if not os.path.isdir(os.path.join(root, "conda-meta")):
            continue
        envs.setdefault("base", root)
        envs_dir = os.path.join(root, "envs")
        for name in sorted(os.listdir(envs_dir)) if os.path.isdir(envs_dir) else []:
            envs.setdefault(name, os.path.join(envs_dir, name))
    return envs


def known_venvs(spec):
    found = []
    for base in [*(expand(d) for d in VENV_DIRS), os.path.dirname(spec.run_root)]:
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if os.path.isfile(os.path.join(base, name, "pyvenv.cfg")):
                found.append(os.path.join(base, name))
    return found


def interpreter_for(spec):
    """The python a run uses: its named environment (interpreter, venv dir or conda env), else the
    platform's interpreter (its hooks, when this box has it), else the image's."""
    wanted = (spec.environment or "").strip()
    if not wanted:
        argv0 = (spec.argv or [""])[0]
        if "/" in argv0 and os.path.basename(argv0).startswith("python"):
            return argv0  # the command names its interpreter outright
        return hook_interpreter(spec) or shutil.which("python3") or sys.executable
    path = expand(wanted)
    if os.path.isfile(path):
        return path
    if os.path.isfile(os.path.join(path, "bin", "python")):
        return os.path.join(path, "bin", "python")
    prefix = conda_envs().get(wanted)
    return os.path.join(prefix, "bin", "python") if prefix else None


def is_conda_base(interpreter):
    """<root>/bin/python with <root>/conda-meta, not inside <root>/envs/: conda's base environment."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(interpreter)))
    return os.path.isdir(os.path.join(prefix, "conda-meta")) and os.path.basename(os.path.dirname(prefix)) != "envs"


def torch_pin(src):
    """A torch requirement in the source's requirements.txt, if any (an install would replace the image's)."""
    text = read(os.path.join(src, "requirements.txt")) or ""
    for line in text.splitlines():
        name = line.split("#", 1)[0].strip()
        if name.lower().startswith("torch") and name[5:6] in ("=", "<", ">", "~", "!", " ", ""):
            return name
    return None


def environment_report(spec):
    interpreter = interpreter_for(spec)
    report = {"requested": spec.environment or "", "interpreter": interpreter}
    report["available"] = {"conda": sorted(conda_envs()), "venvs": known_venvs(spec)}
    if not interpreter or not os.path.isfile(interpreter):
        report["error"] = "no interpreter for environment " + repr(spec.environment)
        return report
    report["conda_base"] = is_conda_base(interpreter)
    try:
        command = [interpreter, "-c", IDENTITY_SCRIPT, *(["--cuda"] if spec.gpus else [])]
        done = subprocess.run(command, stdout=subprocess.PIPE, timeout=120)
        report.update(json.loads(done.stdout.decode().strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        report["error"] = f"the interpreter {interpreter} did not run: {exc}"
    report["torch_pin"] = torch_pin(spec.src) if os.path.isdir(spec.src) else None
    report["lock_file"], report["lock_sha256"] = lock_file(spec.src) if os.path.isdir(spec.src) else (None, None)
    return report


def argv_in_environment(spec):
    """A bare `python`/`python3` in the command means the run's environment's interpreter."""
    argv = list(spec.argv)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = interpreter_for(spec) or argv[0]
    return argv
