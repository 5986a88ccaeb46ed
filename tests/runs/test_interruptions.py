"""Interruption recovery on the loopback node: the process group dies and the box's boot identity
changes (the marker a platform's start hook rewrites) → interrupted, not crashed."""

import contextlib
import csv
import os
import signal
import time
import uuid

import pytest

from fleet import boot_hooks
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from runs.signals import FAILURE_CLASSES
from tests.runs.conftest import SETTLED, set_config, wait_file, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def interrupt(node, run, epochs: int = 2) -> None:
    """Once this many epochs are checkpointed, kill the training's whole process group, as a reboot
    would, and change the boot marker."""
    train_csv = node.active(run) / "output" / "train.csv"
    wait_file(train_csv)
    logged = lambda: len(train_csv.read_text().splitlines()) > epochs  # noqa: E731 (a header, then a row each)
    wait_until(logged, 60, 0.1, what=f"{epochs} epochs checkpointed")
    wrapper_pid, child_pid = map(int, (node.active(run) / "attempt-1" / "pid").read_text().split())
    (node.root.parent / ".remotegpu-boot").write_text(uuid.uuid4().hex)
    for pid in (child_pid, wrapper_pid):
        with contextlib.suppress(ProcessLookupError):
            group = os.getpgid(pid)
            assert group != os.getpgrp()  # the training's group, never the test runner's
            os.killpg(group, signal.SIGKILL)


@pytest.fixture
def boot_marker(node):
    yield node.root.parent / ".remotegpu-boot"
    (node.root.parent / ".remotegpu-boot").unlink(missing_ok=True)


def test_an_interrupted_run_that_opted_in_is_relaunched_and_resumes(
    bob, make_run, node, source, boot_marker, gate, celery_worker_process
):
    set_config(source, epochs=12, hold_file=gate.hold(at=2).path)  # held at epoch 2 until interrupted
    run = make_run(auto_relaunch=True, max_relaunches=2)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    interrupt(node, run)
    gate.release()

    run = wait_state(run, {RunState.EXPORTED}, timeout=240, refresh=True)
    assert run.attempt == 2 and run.relaunches == 1
    messages = list(run.events.values_list("message", flat=True))
    assert any("interrupted: no process, no exit marker, and the box rebooted" in m for m in messages)
    assert any("Interrupted: automatic relaunch 1 of 2: attempt 2" in m for m in messages)
    log = (node.active(run) / "attempt-2" / "log.txt").read_text()
    assert int(log.split("resumed from epoch ")[1].split()[0]) >= 2
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 13))


def test_without_opt_in_an_interruption_is_classified_and_only_offered(
    client, bob, make_run, node, source, boot_marker, gate, celery_worker_process
):
    set_config(source, epochs=12, hold_file=gate.hold(at=2).path)  # held at epoch 2 until interrupted
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    interrupt(node, run)

    run = wait_state(run, {RunState.QUARANTINED}, timeout=120, refresh=True)
    time.sleep(3)  # a watcher tick or two later, still nothing relaunched
    run.refresh_from_db()
    assert run.state == RunState.QUARANTINED and run.attempt == 1 and run.relaunches == 0
    assert run.failure_class == "interrupted" and FAILURE_CLASSES["interrupted"].retry_offered
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Retry identical config" in page and "Interrupted (reboot, container restart, preemption)" in page


def test_the_start_hook_rewrites_the_boot_marker_and_is_installed_once(make_run, node, tmp_path, boot_marker):
    import subprocess

    from runs.box_spec import run_node

    hook = tmp_path / "onstart.sh"
    hook.write_text("#!/bin/bash\necho user line\n")
    with run_node(make_run()) as session:
        boot_hooks.install_start_hook(session, str(hook))
        boot_hooks.install_start_hook(session, str(hook))
    lines = hook.read_text().splitlines()
    assert lines[:2] == ["#!/bin/bash", "echo user line"] and len(lines) == 3  # kept, and added once
    subprocess.run(["bash", str(hook)], check=True, capture_output=True)
    first = boot_marker.read_text()
    time.sleep(0.01)
    subprocess.run(["bash", str(hook)], check=True, capture_output=True)
    assert boot_marker.read_text() != first  # each container start is a new boot identity
