#!/usr/bin/env python3
"""RemoteGPU node wrapper: runs on the GPU box, stdlib only, Python 3.8+.

Uploaded under a versioned name (wrapper-<sha>.py) and never overwritten, so a live run never
has the file it is executing changed under it. Subcommands, each reading a JSON spec file:

  preflight  prove inputs exist, hash identities, measure bytes and inodes   -> JSON on stdout
  smoke      run the command once with REMOTEGPU_SMOKE=1 on CPU              -> JSON on stdout
  run        the detached attempt: pid, heartbeat, command, exit marker, closeout
  status     what is true on the node right now                              -> JSON on stdout
  probe      status of many runs (request JSON on stdin): the watcher's tick -> JSON on stdout
  follow     push what the runs write as they write it, and answer probes asked on stdin (JSON lines)
  abandon    quarantine an attempt that has no process and no exit marker
  roster     relative path, bytes and SHA-256 of every file of the sealed export -> JSON
  extract    unpack a shipped source tarball safely into the run's src/
  mirror     copy the sealed export to a durable tier, hashed against the sealed roster
  rehash     re-hash copies against a roster the control side sends (stdin)
  close-active  move a failed run's active/ into quarantine/ with a reason (stdin)
  idle ROOT  processes that work in or write under ROOT (the shutdown check)
  clean-caches  measure and remove the cache paths the control side names (stdin)
  remove-copy   delete one copy of a sealed export, strictly inside the root named (stdin)

Every subcommand prints one JSON object as its last line; profiles/protocol.py says what each holds.
"""

import contextlib
import errno
import hashlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time

REQUIRED_EXPORT = ("run.json", "config.yaml", "train.csv", "best.pth")
FORBIDDEN_EXPORT = ("latest.pth",)
# One interpreter start (torch's import is seconds of CPU): exit 3 when this python has no torch.
NO_TORCH = 3
LOAD_CHECK = (
    "import sys\n"
    "try:\n"
    "    import torch\n"
    "except ImportError:\n"
    f"    sys.exit({NO_TORCH})\n"
    "torch.load(sys.argv[1], map_location='cpu', weights_only=True)\n"
    "print('loaded')\n"
)


def expand(path):
    if path == "$HOME" or path.startswith("$HOME/"):
        path = "~" + path[len("$HOME") :]
    return os.path.abspath(os.path.expanduser(path))


def load_spec(path):
    with open(path) as handle:
        spec = json.load(handle)
    for key in ("run_root", "active", "src", "cwd", "ckpt", "output", "partial", "export", "quarantine_base"):
        spec[key] = expand(spec[key])
    return spec


def atomic_write(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
RESERVE = ".reserve"  # pre-allocated at launch, so the last markers need no new inode or block


def reserve_markers(attempt):
    """Files (with a block each) and a directory the wrapper may need when the disk is full."""
    reserve = os.path.join(attempt, RESERVE)
    os.makedirs(os.path.join(reserve, "quarantine"), exist_ok=True)
    for name in ("exit_code", "reason.txt"):
        with open(os.path.join(reserve, name), "w") as handle:
            handle.write(" " * 4096)
            handle.flush()
            os.fsync(handle.fileno())
    return reserve


def durable_write(path, text, reserved):
    """atomic_write, or, when the disk is full, the reserved file rewritten in place and renamed."""
    try:
        atomic_write(path, text)
        return
    except OSError as exc:
        if exc.errno not in DISK_FULL or not os.path.exists(reserved):
            raise
        with contextlib.suppress(OSError):
            os.remove(f"{path}.tmp-{os.getpid()}")
    with open(reserved, "r+") as handle:
        handle.write(text)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(reserved, path)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_hash(root):
    """SHA-256 over (relative path, file SHA-256) of every file, sorted: the source identity."""
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
        for name in sorted(files):
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            digest.update((f"{rel}\0{sha256_file(full)}\n").encode())
    return digest.hexdigest()


def measure(path):
    """Bytes and inodes free on the device that will hold path (its nearest existing ancestor)."""
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    info = os.statvfs(probe)
    return {
        "measured_at": probe,
        "device_id": os.stat(probe).st_dev,
        "free_bytes": info.f_bavail * info.f_frsize,
        "total_bytes": info.f_blocks * info.f_frsize,
        "free_inodes": info.f_favail,
        "total_inodes": info.f_files,
    }


MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_of(path):
    """The mount that holds path (its nearest existing ancestor), as /proc/self/mountinfo says: mount
    point, file system type, device (major:minor) and source. None where the kernel does not say.

    A tier is a disk, not a path string: a "durable" root that is a plain directory on the system
    disk (AutoDL without file storage, a Gpushare box not marked 内网存储) measures as that disk."""
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    real = os.path.realpath(probe)
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    best = None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        point = MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = point == "/" or real == point or real.startswith(point.rstrip("/") + "/")
        # The later of two mounts on one point is the one on top: >= keeps it.
        if inside and (best is None or len(point) >= len(best["mountpoint"])):
            best = {"mountpoint": point, "device": fields[2], "fstype": tail[0], "source": tail[1]}
    return best


def boot_identity(spec):
    """What changes when the box reboots or the container restarts: the kernel's boot id, the start
    time of PID 1, and a marker the platform's start hook rewrites (vast.ai `onstart`)."""
    fields = (read("/proc/1/stat") or ")").rsplit(")", 1)[1].split()
    pid1_start = fields[19] if len(fields) > 19 else ""  # starttime, the 22nd field of /proc/<pid>/stat
    marker = (read(spec["boot_marker"]) or "") if spec.get("boot_marker") else ""
    return "|".join([read("/proc/sys/kernel/random/boot_id") or "", pid1_start, marker])


def write_speed(root, size=32 << 20):
    """Measured sequential write of `size` bytes with fsync under root, in bytes per second."""
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, ".remotegpu-write-probe")
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


# ---------------------------------------------------------------- environment

IDENTITY_SCRIPT = (
    "import json, sys\n"
    "info = {'sys_executable': sys.executable, 'python': sys.version.split()[0], 'prefix': sys.prefix}\n"
    "try:\n"
    "    import torch\n"
    "    info.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())\n"
    "    info.update(cuda_device_count=torch.cuda.device_count() if info['cuda_available'] else 0)\n"
    "except Exception as exc:\n"
    "    info.update(torch=None, torch_error=type(exc).__name__)\n"
    "print(json.dumps(info))\n"
)
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
    for base in [*(expand(d) for d in VENV_DIRS), os.path.dirname(spec["run_root"])]:
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if os.path.isfile(os.path.join(base, name, "pyvenv.cfg")):
                found.append(os.path.join(base, name))
    return found


def interpreter_for(spec):
    """The python a run uses: its named environment (interpreter, venv dir or conda env), else the image's."""
    wanted = (spec.get("environment") or "").strip()
    if not wanted:
        argv0 = (spec.get("argv") or [""])[0]
        if "/" in argv0 and os.path.basename(argv0).startswith("python"):
            return argv0  # the command names its interpreter outright
        return shutil.which("python3") or sys.executable
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
    report = {"requested": spec.get("environment") or "", "interpreter": interpreter}
    report["available"] = {"conda": sorted(conda_envs()), "venvs": known_venvs(spec)}
    if not interpreter or not os.path.isfile(interpreter):
        report["error"] = "no interpreter for environment " + repr(spec.get("environment"))
        return report
    report["conda_base"] = is_conda_base(interpreter)
    try:
        done = subprocess.run([interpreter, "-c", IDENTITY_SCRIPT], stdout=subprocess.PIPE, timeout=120)
        report.update(json.loads(done.stdout.decode().strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        report["error"] = f"the interpreter {interpreter} did not run: {exc}"
    report["torch_pin"] = torch_pin(spec["src"]) if os.path.isdir(spec["src"]) else None
    return report


def argv_in_environment(spec):
    """A bare `python`/`python3` in the command means the run's environment's interpreter."""
    argv = list(spec["argv"])
    if argv and argv[0] in ("python", "python3"):
        argv[0] = interpreter_for(spec) or argv[0]
    return argv


def attempt_dir(spec):
    return os.path.join(spec["active"], f"attempt-{spec['attempt']}")


def quarantine_dir(spec):
    return os.path.join(spec["quarantine_base"], f"{spec['run_id']}--{spec['attempt']}")


def run_env(spec, smoke):
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    env.update(
        {
            "REMOTEGPU_RUN_ID": spec["run_id"],
            "REMOTEGPU_ATTEMPT": str(spec["attempt"]),
            "REMOTEGPU_CHECKPOINT_DIR": os.path.join(spec["active"], "smoke", "ckpt") if smoke else spec["ckpt"],
            "REMOTEGPU_OUTPUT_DIR": os.path.join(spec["active"], "smoke", "output") if smoke else spec["output"],
            "REMOTEGPU_SMOKE": "1" if smoke else "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if smoke:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the smoke proves the code, on CPU, before paid GPU time
    elif spec.get("gpus") is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu) for gpu in spec["gpus"])
    return env


# ---------------------------------------------------------------- preflight


def cmd_preflight(spec):
    missing, hashes = [], {}
    for label, path in spec.get("inputs", []):
        if not os.path.exists(expand(path)):
            missing.append({"input": label, "path": path})
    config = spec.get("config")
    if config and os.path.isfile(expand(config)):
        hashes["config_sha256"] = sha256_file(expand(config))
    manifest = spec.get("manifest")
    if manifest and os.path.isfile(expand(manifest)):
        hashes["manifest_sha256"] = sha256_file(expand(manifest))
    if os.path.isdir(spec["src"]):
        hashes["source_tree_sha256"] = tree_hash(spec["src"])
    report = {"missing": missing, "hashes": hashes, "space": measure(spec["run_root"])}
    report["tmux"] = shutil.which("tmux") is not None
    report["python"] = sys.version.split()[0]
    report["write_bytes_per_second"] = write_speed(spec["run_root"])
    report["environment"] = environment_report(spec)
    if spec.get("gpus"):
        report["gpu_holders"] = gpu_holders(spec)
    report["mounts"] = {"data": mount_of(spec["run_root"])}
    if spec.get("data_tier_path"):
        report["mounts"]["declared_tier"] = mount_of(spec["data_tier_path"])
    print(json.dumps(report))
    return 0


def cmd_gpus(spec):
    """At every (re)launch: which GPUs nvidia-smi lists now, and who holds the requested ones (a box
    back from a restart may have come back without its GPUs: RunPod)."""
    holders = gpu_holders(spec)
    print(json.dumps({"gpus": {"nvidia_smi": holders is not None, **(holders or {})}}))
    return 0


def our_pids(spec):
    """The pids of every RemoteGPU attempt on this box (wrapper and child), from their pid files."""
    pids = set()
    root = os.path.dirname(spec["run_root"].rstrip("/"))
    for project in os.listdir(root) if os.path.isdir(root) else []:
        active = os.path.join(root, project, "active")
        for run in os.listdir(active) if os.path.isdir(active) else []:
            base = os.path.join(active, run)
            for name in os.listdir(base) if os.path.isdir(base) else []:
                pids.update(int(p) for p in (read(os.path.join(base, name, "pid")) or "").split() if p.isdigit())
    return pids


def descends_from(pid, ancestors):
    """pid is one of ancestors or their descendant (a DataLoader worker of our child holds GPU memory too)."""
    for _ in range(64):
        if pid in ancestors:
            return True
        fields = (read(f"/proc/{pid}/stat") or ")").rsplit(")", 1)[1].split()
        if len(fields) < 2 or not fields[1].isdigit() or int(fields[1]) <= 1:
            return False
        pid = int(fields[1])
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
        gpus = {row[1]: int(row[0]) for row in query("gpu=index,uuid") if len(row) == 2 and row[0].isdigit()}
        apps = [row for row in query("compute-apps=pid,gpu_uuid,used_memory") if len(row) == 3 and row[0].isdigit()]
    except (OSError, subprocess.TimeoutExpired):
        return None
    ours = our_pids(spec)
    holders = []
    for pid, uuid, used in apps[:256]:
        index = gpus.get(uuid)
        if index in spec["gpus"] and not descends_from(int(pid), ours):
            holders.append({"index": index, "pid": int(pid), "used_mib": int(used) if used.isdigit() else None})
    return {"indices": sorted(gpus.values()), "holders": holders}


# ---------------------------------------------------------------- smoke


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


# ---------------------------------------------------------------- run (detached)


def heartbeat(path, interval, stop):
    while not stop.wait(interval):
        try:
            atomic_write(path, f"{int(time.time())}\n")
        except OSError:  # a full disk: rewrite the same-length stamp in place (no new inode or block)
            with contextlib.suppress(OSError), open(path, "r+") as handle:
                handle.write(f"{int(time.time())}\n")


def validate_export(spec, partial):
    """Why the staged export may not be sealed, or None."""
    for name in REQUIRED_EXPORT:
        if not os.path.isfile(os.path.join(partial, name)):
            return f"required file {name} is missing"
    for directory, _dirs, files in os.walk(partial):
        for name in files:
            if name in FORBIDDEN_EXPORT:
                return f"{os.path.relpath(os.path.join(directory, name), partial)} is forbidden inside an export"
    tests = os.path.join(partial, "test")
    if os.path.isdir(tests):
        for test_id in sorted(os.listdir(tests)):
            for name in ("metrics.json", "results.parquet"):
                if not os.path.isfile(os.path.join(tests, test_id, name)):
                    return f"test/{test_id}/{name} is missing"
    return check_best_loads(spec, os.path.join(partial, "best.pth"))


def check_best_loads(spec, best):
    # Use the run's own interpreter when it is a python: it is the one that has torch.
    argv0 = argv_in_environment(spec)[0]
    python = argv0 if os.path.basename(argv0).startswith("python") else sys.executable
    try:
        done = subprocess.run(
            [python, "-c", LOAD_CHECK, best], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode == NO_TORCH:
        return None  # torch unavailable on the node: the custody readback loads it later
    if done.returncode != 0:
        return "best.pth does not load with weights_only=True: {}".format(done.stdout.decode(errors="replace")[-500:])
    return None


def stage_export(spec, partial):
    """Copy output/ into the staging directory file by file, so a full disk raises its own errno."""
    if os.path.exists(partial):
        shutil.rmtree(partial)
    source = spec["output"]
    for directory, _dirs, names in os.walk(source):
        target = os.path.join(partial, os.path.relpath(directory, source))
        os.makedirs(target, exist_ok=True)
        for name in names:
            shutil.copy2(os.path.join(directory, name), os.path.join(target, name), follow_symlinks=False)


def quarantine(spec, reason):
    target = quarantine_dir(spec)
    source = attempt_dir(spec)
    reserve = os.path.join(source, RESERVE)
    try:
        os.makedirs(target, exist_ok=True)
    except OSError as exc:
        if exc.errno not in DISK_FULL or not os.path.isdir(os.path.join(reserve, "quarantine")):
            raise
        os.rename(os.path.join(reserve, "quarantine"), target)  # no new inode: the reserved directory
    if os.path.exists(spec["partial"]):
        os.replace(spec["partial"], os.path.join(target, "export-partial"))
    # The attempt (log, markers) moves; checkpoints stay in active/ so an identical retry resumes.
    for name in sorted(os.listdir(source)):
        if name != RESERVE:
            os.replace(os.path.join(source, name), os.path.join(target, name))
    durable_write(os.path.join(target, "reason.txt"), reason.strip() + "\n", os.path.join(reserve, "reason.txt"))
    shutil.rmtree(reserve, ignore_errors=True)
    os.rmdir(source)


def closeout(spec):
    """Seal the export, or say why not; a full disk is a reason (disk_full), never the wrapper's death."""
    try:
        return seal(spec)
    except OSError as exc:
        shutil.rmtree(spec["partial"], ignore_errors=True)  # our own staging: give the space back
        if exc.errno in DISK_FULL:
            return "disk_full: {} while sealing the export ({})".format(os.strerror(exc.errno), exc.filename or "")
        return f"closeout failed: {exc}"
    except ValueError as exc:  # e.g. a symlink in the output: never sealed
        shutil.rmtree(spec["partial"], ignore_errors=True)
        return f"closeout failed: {exc}"


def seal(spec):
    if os.path.exists(spec["export"]):
        return "export/{} is already sealed; changed bytes need a new run id".format(spec["run_id"])
    if not os.path.isdir(spec["output"]):
        return "the command wrote no output directory ({})".format(spec["output"])
    stage_export(spec, spec["partial"])
    problem = validate_export(spec, spec["partial"])
    if problem:
        return problem
    # The roster as sealed: later custody checks compare the export against it byte for byte.
    atomic_write(sealed_roster_path(spec), json.dumps(roster_of(spec["partial"])))
    os.rename(spec["partial"], spec["export"])  # atomic on one filesystem; never over an existing export
    return None


def cmd_run(spec):
    attempt = attempt_dir(spec)
    os.makedirs(attempt, exist_ok=True)
    for directory in (spec["ckpt"], spec["output"], os.path.dirname(spec["partial"]), spec["quarantine_base"]):
        os.makedirs(directory, exist_ok=True)
    log_path = os.path.join(attempt, "log.txt")
    reserve = reserve_markers(attempt)
    atomic_write(os.path.join(attempt, "started_at"), f"{int(time.time())}\n")
    atomic_write(os.path.join(attempt, "boot_identity"), boot_identity(spec) + "\n")
    stop = threading.Event()
    beat = os.path.join(attempt, "heartbeat")
    atomic_write(beat, f"{int(time.time())}\n")
    threading.Thread(target=heartbeat, args=(beat, spec.get("heartbeat_seconds", 10), stop), daemon=True).start()
    with open(log_path, "ab") as log:
        try:
            argv = argv_in_environment(spec)
            child = subprocess.Popen(argv, cwd=spec["cwd"], env=run_env(spec, False), stdout=log, stderr=log)
            # What actually ran, read back by the control side: the argv and the kernel's view of it.
            exe = os.path.realpath(f"/proc/{child.pid}/exe") if os.path.exists(f"/proc/{child.pid}/exe") else ""
            atomic_write(os.path.join(attempt, "ran.json"), json.dumps({"argv0": argv[0], "exe": exe}))
        except OSError as exc:
            log.write((f"cannot start the command: {exc}\n").encode())
            child = None
        atomic_write(os.path.join(attempt, "pid"), f"{os.getpid()} {child.pid if child else -1}\n")
        # A SIGTERM to the wrapper is passed on (then SIGKILL after the grace), so the exit marker is
        # still written; a person's stop (cmd_stop) is a SIGTERM with its marker.
        signal.signal(signal.SIGTERM, lambda signum, frame: child and terminate_gracefully(child, spec))
        code = child.wait() if child else 127
    if code < 0:
        code = 128 - code  # killed by a signal: report as a shell would (SIGKILL -> 137)
    stop.set()
    durable_write(os.path.join(attempt, "exit_code"), f"{code}\n", os.path.join(reserve, "exit_code"))
    stopped = stop_reason(spec, code)
    problem = stopped or (f"command exited with code {code}" if code != 0 else closeout(spec))
    if problem:
        quarantine(spec, problem)
        return 1
    with contextlib.suppress(OSError):  # a convenience marker: the export itself is what counts
        atomic_write(os.path.join(spec["active"], "sealed"), f"attempt {spec['attempt']}\n")
    shutil.rmtree(reserve, ignore_errors=True)
    return 0


# ---------------------------------------------------------------- stop

STOP_MARKER = "stop.json"
TERMINATING = []  # the grace timer, armed once per wrapper


def stop_request(spec):
    try:
        return json.loads(read(os.path.join(attempt_dir(spec), STOP_MARKER)) or "null")
    except ValueError:
        return None


def grace_of(spec):
    asked = stop_request(spec) or {}
    seconds = asked.get("grace_seconds", spec.get("stop_grace_seconds", 30))
    return max(0, min(int(seconds), 3600)) if isinstance(seconds, int) else 30


def terminate_gracefully(child, spec):
    """SIGTERM now, so the run can checkpoint; SIGKILL when the grace is over and it is still there."""
    if child.poll() is not None:
        return
    child.terminate()
    if TERMINATING:
        return
    grace = grace_of(spec)

    def kill_after_grace():
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            child.kill()

    TERMINATING.append(threading.Thread(target=kill_after_grace, daemon=True))
    TERMINATING[0].start()


def stop_reason(spec, code):
    """The quarantine reason of an attempt a person stopped (its marker), else None."""
    asked = stop_request(spec)
    if not isinstance(asked, dict):
        return None
    how = "after SIGTERM" if code != 137 else f"by SIGKILL when the {grace_of(spec)} s grace ran out"
    return "stopped by {}: the command ended {} (exit code {})".format(asked.get("by") or "a person", how, code)


def cmd_stop(spec, request):
    """A person's stop: the marker (who, the grace), then SIGTERM to the wrapper, which passes it on to
    the command and kills it when the grace is over. Idempotent; refused where nothing runs."""
    attempt = attempt_dir(spec)
    pids = (read(os.path.join(attempt, "pid")) or "").split()
    wrapper = int(pids[0]) if pids and pids[0].isdigit() else 0
    if not os.path.isdir(attempt) or not wrapper or not alive(wrapper):
        code = read(os.path.join(attempt, "exit_code")) if os.path.isdir(attempt) else None
        print(json.dumps({"stopped": False, "reason": "not running" + (" (exit code " + code + ")" if code else "")}))
        return 0
    by = "".join(ch for ch in str(request.get("by", ""))[:150] if ch.isprintable())
    grace = request.get("grace_seconds")
    marker = {"by": by, "grace_seconds": grace if isinstance(grace, int) else 30, "at": int(time.time())}
    if stop_request(spec) is None:
        atomic_write(os.path.join(attempt, STOP_MARKER), json.dumps(marker))
    os.kill(wrapper, signal.SIGTERM)
    print(json.dumps({"stopped": True, "pid": wrapper}))
    return 0


# ---------------------------------------------------------------- status


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def newest_mtime(root):
    newest = None
    for directory, _dirs, files in os.walk(root):
        for name in files:
            try:
                mtime = os.stat(os.path.join(directory, name)).st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


def tail(path, limit=4000):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def read_from(path, offset, limit=65536):
    """Bytes appended to path since offset (bounded), where they start, where they end; a shorter
    file means it was replaced: restart at 0."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            start = offset if offset <= size else 0
            handle.seek(start)
            chunk = handle.read(limit)
    except OSError:
        return "", offset, offset
    # Only whole lines: a line still being written is read on the next tick.
    cut = chunk.rfind(b"\n") + 1
    return chunk[:cut].decode(errors="replace"), start, start + cut


def largest_items(roots, count=5):
    sizes = []
    for root in roots:
        if not os.path.isdir(root):
            continue
        for name in os.listdir(root):
            full = os.path.join(root, name)
            total = 0
            for directory, _dirs, files in os.walk(full) if os.path.isdir(full) else [("", [], [full])]:
                for file in files:
                    try:
                        total += os.lstat(os.path.join(directory, file)).st_size
                    except OSError:
                        continue
            sizes.append({"path": full, "bytes": total})
    return sorted(sizes, key=lambda item: -item["bytes"])[:count]


def run_status(spec, log_offset=0, csv_offset=0):
    requested_log, requested_csv = log_offset, csv_offset
    attempt = attempt_dir(spec)
    quarantined = quarantine_dir(spec)
    base = attempt if os.path.isdir(attempt) else quarantined
    pids = (read(os.path.join(base, "pid")) or "").split()
    exit_code = read(os.path.join(base, "exit_code"))
    heartbeat_at = read(os.path.join(base, "heartbeat"))
    log_chunk, log_start, log_offset = read_from(os.path.join(base, "log.txt"), log_offset)
    csv_chunk, _, csv_offset = read_from(os.path.join(spec["output"], "train.csv"), csv_offset)
    status = {
        "run_id": spec["run_id"],
        "attempt": spec["attempt"],
        "now": time.time(),
        "launched": bool(pids) or os.path.isdir(quarantined),
        "wrapper_alive": bool(pids) and alive(int(pids[0])),
        "child_alive": len(pids) > 1 and int(pids[1]) > 0 and alive(int(pids[1])),
        "exit_code": int(exit_code) if exit_code not in (None, "") else None,
        "heartbeat_at": int(heartbeat_at) if heartbeat_at else None,
        "exported": os.path.isdir(spec["export"]),
        "quarantine_reason": read(os.path.join(quarantined, "reason.txt")),
        "rebooted": rebooted(spec, base),
        "ran": json.loads(read(os.path.join(base, "ran.json")) or "null"),
        "log_mtime": newest_mtime(base) if os.path.isdir(base) else None,
        "ckpt_mtime": newest_mtime(spec["ckpt"]) if os.path.isdir(spec["ckpt"]) else None,
        "log_from": requested_log,
        "log_chunk": log_chunk,
        "log_start": log_start,
        "log_offset": log_offset,
        "csv_from": requested_csv,
        "csv_chunk": csv_chunk,
        "csv_offset": csv_offset,
        "log_tail": tail(os.path.join(base, "log.txt")),
        "space": measure(spec["run_root"]),
    }
    if status["exit_code"] not in (None, 0):
        cache = os.path.join(spec["run_root"], "cache")
        status["regenerable"] = largest_items([cache, os.path.join(spec["active"], "smoke")])
    return status


def rebooted(spec, base):
    at_launch = read(os.path.join(base, "boot_identity"))
    return at_launch is not None and at_launch != boot_identity(spec)


def cmd_status(spec):
    print(json.dumps(run_status(spec)))
    return 0


def gpu_utilization():
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [line.split(",") for line in done.stdout.decode().splitlines() if line.count(",") == 2]
    return [{"index": int(i), "utilization_pct": int(u), "memory_used_mib": int(m)} for i, u, m in rows]


def probe_answer(request):
    """Every live run of this node at once: the watcher's tick."""
    answers = {}
    for item in request["runs"]:
        try:
            spec = load_spec(item["spec"])
            answers[spec["run_id"]] = run_status(spec, item.get("log_offset", 0), item.get("csv_offset", 0))
        except (OSError, ValueError) as exc:
            answers[item.get("run_id", item["spec"])] = {"error": str(exc)}
    return {"now": time.time(), "gpus": gpu_utilization(), "runs": answers}


def cmd_probe(request):
    print(json.dumps(probe_answer(request)))
    return 0


def emit(event):
    """One event line on the follow stream; False once the reader has gone (the stream ends)."""
    try:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()
        return True
    except (BrokenPipeError, OSError):
        return False


def finished_writing(spec):
    """The attempt wrote its exit marker, or it was quarantined: nothing more will be appended."""
    return read(os.path.join(attempt_dir(spec), "exit_code")) is not None or os.path.isdir(quarantine_dir(spec))


def cmd_follow(request, requests):
    """Push what the runs write as it is written: the watcher's fast path (its probe stays the truth).

    One event per JSON line. "log": whole lines of log.txt as [start, end) byte offsets, so a
    reconnect asks from the last end it got and nothing repeats or goes missing; "exit": the
    attempt finished writing (its log drained first); "heartbeat" every few seconds, so the reader
    can tell a quiet run from a dead stream; "end" when no followed run writes any more, the
    lifetime ran out, or the reader went away. Memory is bounded: at most 64 KiB per run per poll.
    A probe written on stdin meanwhile is answered on the stream within a poll (`answer_probe`).
    """
    poll = min(max(float(request.get("poll", 0.2)), 0.05), 5.0)
    beat = min(max(float(request.get("heartbeat", 2.0)), 0.5), 60.0)
    deadline = time.time() + min(float(request.get("lifetime", 120)), 3600)
    followed = []
    for item in request["runs"]:
        try:
            followed.append([load_spec(item["spec"]), int(item.get("log_offset", 0))])
        except (OSError, ValueError, KeyError) as exc:
            emit({"type": "error", "spec": str(item.get("spec")), "error": str(exc)})
    last_beat = 0.0
    while followed and time.time() < deadline:
        for entry in list(followed):
            spec, offset = entry
            done = finished_writing(spec)  # read before the log: a marker seen means the log is complete
            base = attempt_dir(spec) if os.path.isdir(attempt_dir(spec)) else quarantine_dir(spec)
            text, start, end = read_from(os.path.join(base, "log.txt"), offset)
            if text:
                event = {"type": "log", "run_id": spec["run_id"], "attempt": spec["attempt"]}
                if not emit({**event, "start": start, "end": end, "text": text}):
                    return 0
                entry[1] = end
            elif done:
                if not emit({"type": "exit", "run_id": spec["run_id"], "attempt": spec["attempt"]}):
                    return 0
                followed.remove(entry)
        if time.time() - last_beat >= beat:
            if not emit({"type": "heartbeat", "now": time.time()}):
                return 0
            last_beat = time.time()
        for line in requests.wait(poll):  # the poll's pause, cut short by a probe asked meanwhile
            if not answer_probe(line):
                return 0
    emit({"type": "end"})
    return 0


class Requests:
    """The lines the control side writes on the follow stream's stdin: the request, then its probes.

    Read from the descriptor without blocking past the timeout asked; a line is at most LIMIT bytes
    (a longer one is dropped), and what stdin held when it closed without a newline is a last line
    (a request written whole, then EOF)."""

    LIMIT = 1 << 20

    def __init__(self, fd=0):
        self.fd, self.buffer, self.open, self.pending = fd, b"", True, []

    def wait(self, timeout):
        """The whole lines that arrive within timeout seconds (a plain pause once stdin is closed)."""
        if self.pending:
            lines, self.pending = self.pending, []
            return lines
        if not self.open:
            time.sleep(timeout)
            return []
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 1 << 16)
        self.buffer += data if data else b"\n"
        self.open = bool(data)
        *lines, self.buffer = self.buffer.split(b"\n")
        if len(self.buffer) > self.LIMIT:
            self.buffer = b""
            emit({"type": "error", "error": f"a request line longer than {self.LIMIT} bytes was dropped"})
        return [line for line in lines if line.strip() and len(line) <= self.LIMIT]

    def first(self, timeout=30.0):
        deadline = time.time() + timeout
        while time.time() < deadline and (self.open or self.buffer):
            lines = self.wait(min(1.0, max(deadline - time.time(), 0.0)))
            if lines:
                self.pending = lines[1:]  # probes written right behind the request
                return json.loads(lines[0])
        raise ValueError("no follow request on stdin")


def answer_probe(line):
    """A probe asked over the follow stream: the same answer as `probe`, as one "status" line per run
    (each within the stream's line limit) and a closing "probed" line; no process, no exec. False
    once the reader has gone."""
    try:
        request = json.loads(line)
        asked, runs = request["probe"], request["runs"]
        if not isinstance(asked, int) or not isinstance(runs, list):
            raise ValueError("a probe needs an integer id and a list of runs")
        answer = probe_answer(request)
    except (ValueError, KeyError, TypeError) as exc:
        return emit({"type": "error", "error": f"a probe request was refused: {exc}"})
    for run_id, status in answer["runs"].items():
        if not emit({"type": "status", "probe": asked, "run_id": str(run_id), "status": status}):
            return False
    return emit({"type": "probed", "probe": asked, "now": answer["now"], "gpus": answer["gpus"]})


def roster_of(root):
    """Relative path, bytes and SHA-256 of every file under root, in one streamed pass."""
    files = []
    for directory, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(directory, name)
            if os.path.islink(full):
                raise ValueError("symlink in an export: " + os.path.relpath(full, root))
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            files.append({"path": rel, "bytes": os.path.getsize(full), "sha256": sha256_file(full)})
    return files


def sealed_roster_path(spec):
    return os.path.join(spec["active"], "sealed-roster.json")


def cmd_roster(spec):
    """The sealed export's roster now, next to the roster recorded when it was sealed.

    Only export/<run-id> is ever rostered: active/, cache/ and .partial/ are mutable or unsealed.
    """
    root = spec["export"]
    if not os.path.isdir(root) or os.path.basename(os.path.dirname(root)) != "export":
        print(json.dumps({"error": "no sealed export at " + root}))
        return 1
    try:
        files = roster_of(root)
    except ValueError as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    sealed = read(sealed_roster_path(spec))
    print(json.dumps({"export": root, "files": files, "sealed": json.loads(sealed) if sealed else None}))
    return 0


def copy_hashing(source, target):
    digest = hashlib.sha256()
    with open(source, "rb") as src, open(target, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            digest.update(block)
            dst.write(block)
        dst.flush()
        os.fsync(dst.fileno())
    return digest.hexdigest()


def durable_problem(spec, root, target):
    """Why root cannot hold a durable mirror, measured: it must exist (it is never created: a missing
    mount would put the copy on the system disk), hold target, and be a disk other than the data root's."""
    if not os.path.isdir(root) or os.path.islink(root):
        return "durable root " + root + " does not exist on this box (it is never created: mount the durable disk)"
    real_root = os.path.realpath(root)
    if not (os.path.realpath(os.path.dirname(target)) + "/").startswith(real_root.rstrip("/") + "/"):
        return "refusing a mirror outside the durable root " + root
    durable, data = mount_of(root), mount_of(spec["run_root"])
    if durable is None or data is None:
        return "the mounts of " + root + " cannot be read (/proc/self/mountinfo)"
    if durable["device"] == data["device"]:
        facts = (root, durable["device"], durable["fstype"], durable["mountpoint"])
        return "durable root {} is on the data root's disk (device {}, {} at {}): not a separate disk".format(*facts)
    return None


def durable_space_problem(root, files):
    """The durable disk must hold the export: its bytes and its inodes (AutoDL's file storage caps
    inodes near 200K), with the directories the copy makes, before a byte is copied."""
    space = measure(root)
    need_bytes = sum(item["bytes"] for item in files)
    need_inodes = len(files) + len({os.path.dirname(item["path"]) for item in files}) + 8
    if space["free_bytes"] < need_bytes:
        return "the durable disk at {} has {} bytes free; the export needs {}".format(
            root, space["free_bytes"], need_bytes
        )
    if space["total_inodes"] and space["free_inodes"] < need_inodes:
        return "the durable disk at {} has {} inodes free; the export needs {}".format(
            root, space["free_inodes"], need_inodes
        )
    return None


def cmd_mirror(spec, target, root):
    """Copy the sealed export to a durable tier on this node (no bytes through the control host).

    root, the durable root, is measured first (durable_problem). Each file is hashed while it is
    copied and compared with the roster recorded at sealing; the copy is staged under <target>.partial
    and renamed into place only when every file matches. The answer carries the measured mount.
    """
    problem = durable_problem(spec, root, target)
    if problem:
        print(json.dumps({"error": problem, "mount": mount_of(root) if os.path.isdir(root) else None}))
        return 1
    mount = mount_of(root)
    sealed = read(sealed_roster_path(spec))
    if not sealed:
        print(json.dumps({"error": "no sealed roster for " + spec["export"]}))
        return 1
    files = json.loads(sealed)
    if os.path.isdir(target):
        same = roster_of(target) == files
        print(json.dumps({"mirror": target, "existing": True, "verified": same, "mount": mount}))
        return 0 if same else 1
    short = durable_space_problem(root, files)
    if short:
        print(json.dumps({"error": short, "mount": mount}))
        return 1
    staging = target + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    for item in files:
        destination = os.path.join(staging, item["path"])
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        if copy_hashing(os.path.join(spec["export"], item["path"]), destination) != item["sha256"]:
            shutil.rmtree(staging, ignore_errors=True)
            print(json.dumps({"error": "hash mismatch while mirroring " + item["path"]}))
            return 1
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(staging, target)
    total = sum(item["bytes"] for item in files)
    answer = {"mirror": target, "existing": False, "verified": True, "files": len(files), "bytes": total}
    print(json.dumps({**answer, "mount": mount}))
    return 0


def rehash_problem(root, files):
    """None when root holds exactly these files with these bytes and SHA-256; else the first problem."""
    if not os.path.isdir(root) or os.path.islink(root):
        return "missing: " + root
    expected = set()
    for item in files:
        rel = item["path"]
        if rel.startswith("/") or ".." in rel.split("/"):
            return "refusing roster path " + rel
        full = os.path.join(root, rel)
        expected.add(rel)
        if os.path.islink(full) or not os.path.isfile(full):
            return rel + " is missing"
        if os.path.getsize(full) != item["bytes"]:
            return rel + " has changed size"
        if sha256_file(full) != item["sha256"]:
            return rel + " no longer matches its SHA-256"
    for directory, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
            if rel not in expected:
                return "unexpected file " + rel
    return None


def cmd_rehash(request):
    """Re-hash copies of a sealed export where they live, against the roster the control side holds.

    The roster comes from the control side (what custody verified), never from the box itself.
    """
    answers = []
    for copy in request["copies"]:
        try:
            problem = rehash_problem(copy["root"], copy["files"])
        except OSError as exc:
            problem = "unreadable: " + str(exc)
        mount = mount_of(copy["root"])
        expected = copy.get("mount")
        if problem is None and expected and (mount or {}).get("device") != expected.get("device"):
            # The copy is on another disk than the one it was verified on (a durable mount that is gone
            # leaves the directory on the disk below it): re-measured, it is not on its tier.
            problem = "its disk changed: verified on {} ({}), now on {}".format(
                expected.get("device"), expected.get("mountpoint"), (mount or {}).get("device")
            )
        answers.append({"root": copy["root"], "intact": problem is None, "problem": problem, "mount": mount})
    print(json.dumps({"schema": 1, "copies": answers}))
    return 0


def cmd_close_active(request):
    """Move a failed run's leftover active/<run-id> into quarantine/ with a reason (nothing deleted)."""
    active, target = request["active"], request["quarantine"]
    parents = (os.path.basename(os.path.dirname(active)), os.path.basename(os.path.dirname(target)))
    if parents != ("active", "quarantine"):
        print(json.dumps({"error": "refusing paths outside active/ and quarantine/"}))
        return 1
    if not os.path.isdir(active):
        print(json.dumps({"closed": True, "moved": False, "reason": "no active/ directory left"}))
        return 0
    for attempt in sorted(os.listdir(active)):
        for pid in (read(os.path.join(active, attempt, "pid")) or "").split():
            if pid.isdigit() and int(pid) > 0 and alive(int(pid)):
                print(json.dumps({"closed": False, "reason": f"process {pid} of {attempt} is alive"}))
                return 0
    if os.path.exists(target):
        print(json.dumps({"error": "quarantine target already exists: " + target}))
        return 1
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(active, target)
    atomic_write(os.path.join(target, "reason.txt"), request["reason"].strip() + "\n")
    print(json.dumps({"closed": True, "moved": True, "to": target}))
    return 0


def cmd_abandon(spec):
    """The control side saw no process and no exit marker: quarantine the attempt as dead."""
    attempt = attempt_dir(spec)
    pids = (read(os.path.join(attempt, "pid")) or "").split()
    if any(alive(int(pid)) for pid in pids if int(pid) > 0):
        print(json.dumps({"abandoned": False, "reason": "a process is alive"}))
        return 0
    if not os.path.isdir(attempt):
        print(json.dumps({"abandoned": False, "reason": "nothing to abandon"}))
        return 0
    code = read(os.path.join(attempt, "exit_code"))
    if code is not None:
        if os.path.isdir(spec["export"]):
            print(json.dumps({"abandoned": False, "reason": "sealed"}))
            return 0
        # The command exited but the wrapper died before sealing or quarantining (a full disk?).
        shutil.rmtree(spec["partial"], ignore_errors=True)
        quarantine(spec, f"closeout never finished after exit code {code.strip()}: the wrapper died while sealing")
        print(json.dumps({"abandoned": True, "closeout": True}))
        return 0
    if rebooted(spec, attempt):
        quarantine(spec, "interrupted: no process, no exit marker, and the box rebooted or its container restarted")
    else:
        quarantine(spec, "dead: no process and no exit marker (wrapper killed, node rebooted or preempted)")
    print(json.dumps({"abandoned": True}))
    return 0


# ---------------------------------------------------------------- extract


def cmd_extract(spec):
    tarball = os.path.join(spec["active"], "src.tar")
    if os.path.exists(spec["src"]):
        print(json.dumps({"extracted": False, "reason": "src already present"}))
        return 0
    staging = spec["src"] + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or member.issym() or member.islnk() or member.isdev():
                raise SystemExit(f"refusing unsafe member in source tarball: {member.name!r}")
        archive.extractall(staging)
    os.rename(staging, spec["src"])
    os.remove(tarball)
    print(json.dumps({"extracted": True}))
    return 0


def cmd_idle(root):
    """Processes that work in, or hold a file open for writing under, root (scans /proc)."""
    print(json.dumps({"busy": busy_under(root)}))
    return 0


def busy_under(root, writers_only=True):
    """[{pid, why}] of processes working in root or holding a file under it open (for writing)."""
    root = os.path.realpath(root) + os.sep
    busy = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.path.realpath("/proc/" + pid + "/cwd")
            if (cwd + os.sep).startswith(root):
                busy.append({"pid": int(pid), "why": "works in " + cwd})
                continue
            for fd in os.listdir("/proc/" + pid + "/fd"):
                target = os.readlink("/proc/" + pid + "/fd/" + fd)
                if not target.startswith(root):
                    continue
                with open("/proc/" + pid + "/fdinfo/" + fd) as info:
                    # "pos:" comes first; the open flags are on their own line, in octal.
                    fields = dict(line.split(":", 1) for line in info.read().splitlines() if ":" in line)
                flags = int(fields["flags"].strip(), 8)
                if flags & 3 or not writers_only:
                    busy.append({"pid": int(pid), "why": "writes " + target})
                    break
        except (OSError, ValueError, KeyError):
            continue
    return busy


def tree_bytes(path):
    total = 0
    for directory, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


def cmd_clean_caches(request):
    """Remove the named cache directories (the control side chose them and spared every export)."""
    removed, freed = [], 0
    for path in request["paths"]:
        if (
            not os.path.isabs(path)
            or ".." in path.split("/")
            or os.path.realpath(path) in ("/", os.path.expanduser("~"))
        ):
            print(json.dumps({"error": "refusing to remove " + path}))
            return 1
        if os.path.lexists(path):
            freed += tree_bytes(path) if os.path.isdir(path) and not os.path.islink(path) else os.lstat(path).st_size
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(path)
    print(json.dumps({"freed": freed, "removed": removed}))
    return 0


def cmd_remove_copy(request):
    """Delete one copy of a sealed export: a directory strictly inside the root the control side
    names (the project's export/ or its durable mirror), never a link, never the root itself, never
    reached through "..". Gone already: answered as removed nothing, so a retry is harmless."""
    path, root = request["path"], request["root"]
    parts = path.split("/")
    if not (os.path.isabs(path) and os.path.isabs(root)) or ".." in parts or os.path.islink(path):
        print(json.dumps({"error": "refusing to remove " + path}))
        return 1
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if real == real_root or not real.startswith(real_root.rstrip("/") + "/") or real in ("/", os.path.expanduser("~")):
        print(json.dumps({"error": "refusing to remove " + path + ": not strictly inside " + root}))
        return 1
    if not os.path.lexists(path):
        print(json.dumps({"removed": False, "bytes": 0}))
        return 0
    size = tree_bytes(path) if os.path.isdir(path) else os.lstat(path).st_size
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    print(json.dumps({"removed": True, "bytes": size}))
    return 0


COMMANDS = {
    "preflight": cmd_preflight,
    "smoke": cmd_smoke,
    "run": cmd_run,
    "status": cmd_status,
    "extract": cmd_extract,
    "abandon": cmd_abandon,
    "roster": cmd_roster,
    "gpus": cmd_gpus,
}


def main(argv):
    if len(argv) == 5 and argv[1] == "mirror":
        return cmd_mirror(load_spec(argv[2]), argv[3], argv[4])
    if len(argv) == 2 and argv[1] == "probe":
        return cmd_probe(json.load(sys.stdin))
    if len(argv) == 2 and argv[1] == "follow":
        requests = Requests()
        return cmd_follow(requests.first(), requests)
    if len(argv) == 2 and argv[1] == "rehash":
        return cmd_rehash(json.load(sys.stdin))
    if len(argv) == 2 and argv[1] == "close-active":
        return cmd_close_active(json.load(sys.stdin))
    if len(argv) == 3 and argv[1] == "idle":
        return cmd_idle(argv[2])
    if len(argv) == 3 and argv[1] == "stop":
        return cmd_stop(load_spec(argv[2]), json.load(sys.stdin))
    if len(argv) == 2 and argv[1] == "clean-caches":
        return cmd_clean_caches(json.load(sys.stdin))
    if len(argv) == 2 and argv[1] == "remove-copy":
        return cmd_remove_copy(json.load(sys.stdin))
    if len(argv) != 3 or argv[1] not in COMMANDS:
        sys.stderr.write(
            "usage: remotegpu_wrapper.py {{{}}} SPEC.json | probe < REQUEST.json\n".format(",".join(COMMANDS))
        )
        return 2
    return COMMANDS[argv[1]](load_spec(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
