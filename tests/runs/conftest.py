"""Runs on a real node: the loopback sshd, the tinyfit example copied per test, a real worker."""

import contextlib
import functools
import hashlib
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from projects.models import Project
from runs.models import Run, RunState, SourceKind
from tests import factories
from tests.conftest import REPO
from tests.personas import join
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT, NODE_ROOT_PATH

# The fixtures the tests of other apps share (their conftests import these): the loopback box, runs and
# the sources they train from.
__all__ = [
    "box_row",
    "gate",
    "instance",
    "make_run",
    "node",
    "project",
    "source",
    "standin_checkpoints",
    "standin_source",
    "tinyfit_source",
]

TINYFIT = REPO / "examples" / "tinyfit"
STANDIN = REPO / "tests" / "standin"
STANDIN_EPOCHS = 64  # the most epochs a stand-in run may train (its checkpoints are prebuilt)
TEST_SAMPLES = 512  # tinyfit's samples in tests (the example's own config: 2048)
SETTLED = {
    RunState.FAILED_PREFLIGHT,
    RunState.FAILED_SMOKE,
    RunState.FAILED_LAUNCH,
    RunState.RUNNING,
    RunState.EXPORTED,
    RunState.QUARANTINED,
}


class Node:
    """The node is this machine reached over SSH: its files can be read back directly."""

    def __init__(self, project: Project):
        self.root = Path(NODE_ROOT_PATH) / project.slug

    def active(self, run):
        return self.root / "active" / run.run_id

    def export(self, run):
        return self.root / "export" / run.run_id

    def quarantine(self, run, attempt):
        return self.root / "quarantine" / f"{run.run_id}--{attempt}"


@functools.cache
def load_wrapper():
    """The node wrapper as a module of this process (it is a standalone script on the box): loaded once
    per process, as compiling its one file costs ~20 ms (the stateful evidence test loaded it 438 times)."""
    import importlib.util

    from node.build import wrapper_file

    spec = importlib.util.spec_from_file_location("remotegpu_wrapper", wrapper_file())
    wrapper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrapper)
    return wrapper


def stop_processes_under(root: Path) -> list[int]:
    """SIGKILL whatever still works in or holds a file under root (a run a test left behind), so the
    shared loopback box is idle for the next test's shutdown check; the pids it stopped."""
    import signal

    wrapper = load_wrapper()
    mine = {os.getpid(), os.getppid()}
    stopped = []
    for item in wrapper.busy_under(str(root), writers_only=False):
        if item["pid"] not in mine:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(item["pid"], signal.SIGKILL)
                stopped.append(item["pid"])
    return stopped


@pytest.fixture
def project(alice, bob, carol):
    project = factories.project(name=f"T {uuid.uuid4().hex[:6]}", slug=f"t{uuid.uuid4().hex[:10]}")
    join(project, alice, bob, carol)
    yield project
    root = Node(project).root
    if root.exists():
        stop_processes_under(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def node(project):
    return Node(project)


@pytest.fixture
def instance(project, sshd):
    name = f"{project.slug}-node-{timezone.localdate():%Y%m%d}"
    return factories.box(name=name, project=project, **sshd.instance_fields(project))


@pytest.fixture
def box_row(project):
    """A registered, running box for tests that never talk to it (forms, refusals, permissions, API
    answers): a row only, no sshd. A test that reaches it over SSH fails to connect, loudly."""
    credential = factories.ssh_key(project, "env:RGPU_TEST_UNUSED_KEY")
    return factories.box(
        project,
        credential=credential,
        host="127.0.0.1",
        port=22,
        user="nobody",
        state="running",
        data_root_override=NODE_ROOT,
        shutdown_command="true",
        # A confirmed host key (forms refuse a box whose key nobody confirmed); no server holds it.
        host_key_type="ssh-ed25519",
        host_key_base64="AAAAC3NzaC1lZDI1NTE5AAAAIBt1c3Qtbm8tc2VydmVyLWhvbGRzLXRoaXMta2V5",
        host_key_confirmed_at=timezone.now(),
    )


@pytest.fixture
def source(tinyfit_source):
    """The source a test's runs train from (make_run's): tinyfit. A module whose tests are about what
    happens around a training (watching, stopping, moving, reconciling) overrides it with the stand-in
    (standin_source), which keeps the contract without torch's seconds of CPU per process."""
    return tinyfit_source


@pytest.fixture
def tinyfit_source():
    """A private copy of the example under an allowed source root, editable per test. Its data are a
    quarter of the example's (512 samples): an epoch in tens of milliseconds, every step the same."""
    target = Path(settings.VAR_DIR) / "sources" / uuid.uuid4().hex
    shutil.copytree(TINYFIT, target, ignore=shutil.ignore_patterns("ckpt", "output", "__pycache__"))
    set_config(target, samples=TEST_SAMPLES)
    yield target
    shutil.rmtree(target, ignore_errors=True)


def build_standin_checkpoints(directory: Path) -> None:
    """Real torch checkpoints of tinyfit's shape for every epoch the stand-in trains, and the index by
    SHA-256 it resumes from (tests/standin/train.py)."""
    import json

    import torch

    index = {}
    for epoch in range(1, STANDIN_EPOCHS + 1):
        torch.manual_seed(epoch)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).state_dict()
        val_loss = 1.0 / (epoch + 1) + 0.01
        torch.save({"model": model, "epoch": epoch, "best_val": val_loss}, directory / f"latest-{epoch}.pth")
        torch.save({"model": model, "epoch": epoch, "val_loss": val_loss}, directory / f"best-{epoch}.pth")
        torch.save({"model": model, "epoch": epoch}, directory / f"last-{epoch}.pth")
        index[hashlib.sha256((directory / f"latest-{epoch}.pth").read_bytes()).hexdigest()] = epoch
    (directory / "index.json").write_text(json.dumps(index))


@pytest.fixture(scope="session")
def standin_checkpoints(tmp_path_factory) -> Path:
    from tests.built_once import built_once

    return built_once(tmp_path_factory, "standin-checkpoints", build_standin_checkpoints)


@pytest.fixture
def standin_source(standin_checkpoints):
    """A private copy of the stand-in trainer (tinyfit's contract without torch: tests/standin/train.py)
    for a test about what happens around a training; a module uses it as its `source`."""
    target = Path(settings.VAR_DIR) / "sources" / uuid.uuid4().hex
    shutil.copytree(STANDIN, target, ignore=shutil.ignore_patterns("ckpt", "output", "__pycache__"))
    shutil.copyfile(TINYFIT / "config.yaml", target / "config.yaml")  # the same keys (a sweep varies lr)
    set_config(target, samples=TEST_SAMPLES, prebuilt=standin_checkpoints)
    yield target
    shutil.rmtree(target, ignore_errors=True)


def edit_train(source: Path, old: str, new: str) -> None:
    """Change the example's train.py for one test; fails if the example no longer has `old`."""
    train = source / "train.py"
    text = train.read_text()
    assert text.count(old) == 1, f"train.py no longer has exactly one {old!r}"
    train.write_text(text.replace(old, new))


class Gate:
    """The example's hold_file: while it exists the run waits after each logged, checkpointed epoch.
    A test holds a run at the epoch it needs for as long as it acts (a stop, a kill, a lost box, a
    count of watcher ticks), then lets it finish at once: no epoch_pause long enough to be caught."""

    def __init__(self, path: Path):
        self.path = path

    def hold(self, at: int | None = None) -> "Gate":
        """Hold the run after every epoch, or only from epoch `at` on (moved by holding again)."""
        self.path.write_text("" if at is None else f"{at}\n")
        return self

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


@pytest.fixture
def gate(tmp_path):
    """A held gate (tinyfit's hold_file), released when the test ends so no run waits forever."""
    held = Gate(tmp_path / "hold").hold()
    yield held
    held.release()


def logged_epochs(node: Node, run: Run) -> int:
    """Epochs the run has logged in its output/train.csv on the box (0 before the first)."""
    train_csv = node.active(run) / "output" / "train.csv"
    try:
        return max(len(train_csv.read_text().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


def set_config(source: Path, **values) -> None:
    lines = [line for line in (source / "config.yaml").read_text().splitlines() if line.split(":")[0] not in values]
    lines += [f"{key}: {value}" for key, value in values.items()]
    (source / "config.yaml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def make_run(project, instance, source):
    def make(**fields) -> Run:
        defaults = {
            "project": project,
            "instance": instance,
            "source_kind": SourceKind.LOCAL_DIR,
            "source_path": str(source),
            "command": [sys.executable, "train.py", "--config", "config.yaml"],
            "config_path": "config.yaml",
            "expected_minutes": 1,
            "checkpoint_bytes": 1024**2,
            "run_id": f"{project.slug}-{uuid.uuid4().hex[:8]}",
        }
        return Run.objects.create(**{**defaults, **fields})

    return make


def wait_state(run: Run, states, timeout: float = 120, refresh: bool = False) -> Run:
    """Poll the database until run reaches a state; with refresh, arm watchers as beat would."""
    from watching.tasks import arm_watchers

    states = {RunState(state) for state in states}
    armed = [0.0]

    def arm():
        if refresh and time.monotonic() > armed[0]:
            arm_watchers()
            armed[0] = time.monotonic() + 2

    def stayed():
        events = list(run.events.values_list("message", flat=True))
        return f"{run.run_id} stayed {run.state}, wanted {states}; events: {events}"

    arm()
    wait_until(lambda: run.refresh_from_db() or run.state in states, timeout, 0.5, what=stayed, between=arm)
    return run


def wait_file(path: Path, timeout: float = 120) -> Path:
    wait_until(path.exists, timeout, 0.3, what=f"{path} appearing")
    return path


def wait_health(run: Run, health: str, timeout: float = 60) -> Run:
    """Poll until the watcher reports a health (unreachable, stalled, …) for the run."""
    wait_until(lambda: run.refresh_from_db() or run.health == health, timeout, 0.3, what=f"{run.run_id} {health}")
    return run
