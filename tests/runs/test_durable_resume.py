"""Checkpoints that outlive the box, on two loopback boxes (two sshd, two data roots) sharing a real
tmpfs as their durable tier: tinyfit's checkpoints are mirrored while it trains; box 1 is lost (its
processes killed, its active/ removed, as a reclaimed pod's disk is); the run continues on box 2 from
the durable copy and seals an export that verifies. A variant that ignores its checkpoint is caught
as a broken resume and is not relaunched again. A Trainer-style script (examples/trainerfit, its
checkpoint folders declared) continues on box 2 from its declared folder, restored as one unit."""

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from core.states import IllegalTransition
from custody.actions import do_start_verification
from custody.models import CustodyStatus
from fleet.models import Instance
from notifications.models import Event, Notification
from runs import rollups
from runs.actions.lifecycle import do_start_preflight
from runs.actions.moves import do_continue_elsewhere
from runs.models import RunState
from tests import factories
from tests.runs.conftest import SETTLED, edit_train, set_config, wait_file, wait_state
from tests.runs.test_interruptions import interrupt
from tests.runs.test_no_edit import TRAINERFIT, TRAINERFIT_FILES, copied
from tests.sshd import Sshd
from tests.waiting import wait_until
from tests.worker_env import NODE_ROOT, WORKER

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]

DURABLE = f"$HOME/ckpt-durable-{WORKER or 'main'}"
SECOND_ROOT = f"{NODE_ROOT}-box2"


def on_this_machine(path: str) -> Path:
    return Path(path.replace("$HOME", os.path.expanduser("~"), 1))


@pytest.fixture(scope="module")
def durable_disk():
    """One tmpfs both boxes mount as their durable tier (a RunPod network volume, a shared NFS)."""
    root = on_this_machine(DURABLE)
    root.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(root):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(root)], check=True)
    yield root
    subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.fixture(scope="module")
def second_sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("box2-sshd"))
    yield server.start()
    server.stop()


@pytest.fixture
def boxes(project, instance, second_sshd, durable_disk):
    instance.mirror_root = DURABLE
    instance.save()
    fields = {**second_sshd.instance_fields(project), "data_root_override": SECOND_ROOT, "mirror_root": DURABLE}
    box2 = factories.box(name=f"{project.slug}-box2-{timezone.localdate():%Y%m%d}", project=project, **fields)
    yield instance, box2
    root = on_this_machine(SECOND_ROOT) / project.slug
    from tests.runs.conftest import stop_processes_under

    if root.exists():
        stop_processes_under(root)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(durable_disk / "remotegpu-ckpt" / project.slug, ignore_errors=True)
    shutil.rmtree(durable_disk / "remotegpu-custody" / project.slug, ignore_errors=True)


def durable_copy(run, name: str = "latest.pth") -> dict | None:
    """The durable copy of that checkpoint the watcher last reported, or None."""
    run.refresh_from_db()
    return (run.durable_ckpt.get("files") or {}).get(name)


def durable_step(run) -> int | None:
    latest = durable_copy(run)
    return latest["step"] if latest else None


def wait_durable(run, step: int) -> None:
    """Until the watcher reports a durable copy of at least this step (arming watchers as beat would)."""
    from watching.tasks import arm_watchers

    wait_until(lambda: (durable_step(run) or 0) >= step, 90, 0.5, what=f"step {step} durable", between=arm_watchers)


def lose_box(node, run) -> None:
    """The pod is reclaimed: every process of the attempt dies and its disk (active/) is gone."""
    wrapper_pid, child_pid = map(int, (node.active(run) / "attempt-1" / "pid").read_text().split())
    for pid in (child_pid, wrapper_pid):
        with contextlib.suppress(ProcessLookupError):
            group = os.getpgid(pid)
            assert group != os.getpgrp()
            os.killpg(group, signal.SIGKILL)
    shutil.rmtree(node.active(run))


def continue_on(run, box, bob):
    """What the person does on the run page: continue on box 2, its box gone (retried while the watcher
    is mid-way closing the lost attempt: an exited run is neither running nor closed yet)."""

    def accepted():
        try:
            return do_continue_elsewhere(run.pk, box.pk, actor=bob, box_gone=True)
        except IllegalTransition:
            return None

    return wait_until(accepted, 60, 0.5, what="the continuation accepted")


def test_a_run_continues_on_another_box_from_its_durable_checkpoint_and_verifies(
    bob, make_run, node, source, boxes, gate, celery_worker_process
):
    box1, box2 = boxes
    set_config(source, epochs=12, hold_file=gate.hold(at=3).path)  # held at epoch 3 until the box is lost
    run = make_run()
    rollups.add(run, runs=1)  # as do_create_run counts it: the move carries it to box 2
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    wait_durable(run, 3)
    assert (run.ckpt_mirror.get("newest") or {}).get("sha256")
    seen_before_loss = durable_step(run)
    lost_at = time.monotonic()
    lose_box(node, run)
    gate.release()

    continue_on(run, box2, bob)
    run = wait_state(run, {RunState.RUNNING, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}, refresh=True)
    training_again = time.monotonic() - lost_at
    assert run.state == RunState.RUNNING and run.instance_id == box2.pk and run.attempt == 2
    floor = run.resume_floor
    assert floor >= seen_before_loss
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=240, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    box2_active = on_this_machine(SECOND_ROOT) / run.project.slug / "active" / run.run_id
    log = (box2_active / "attempt-2" / "log.txt").read_text()
    # From the floor the move named, or from a newer copy the mirror made after the last look at box 1
    # (CI: the box was lost just after epoch 4 was mirrored): said on the run, never an older one.
    resumed = int(re.search(r"resumed from epoch (\d+)", log).group(1))
    assert resumed >= floor and f"epoch {resumed + 1}/12" in log and "epoch 1/12" not in log
    messages = list(run.events.values_list("message", flat=True))
    newer = [m for m in messages if m.startswith("Restored latest.pth from the newer durable copy")]
    assert bool(newer) == (resumed > floor), (resumed, floor, newer)
    assert run.resume_broken == "" and "resume_broken" not in run.alerts
    assert [int(row["epoch"]) for row in run.curve] == list(range(1, 13))  # one line across both boxes
    export = on_this_machine(SECOND_ROOT) / run.project.slug / "export" / run.run_id
    with open(export / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 13))
    assert [move["to"] for move in run.moves] == [box2.name]
    messages = list(run.events.values_list("message", flat=True))
    assert any(f"Continuing on {box2.name} (from {box1.name})" in m for m in messages)

    record = do_start_verification(run.pk, actor=bob)
    wait_until(lambda: record.refresh_from_db() or record.status in ("verified", "failed"), 120, 0.3, what="custody")
    assert record.status == CustodyStatus.VERIFIED, record.failure
    print(f"\nbox lost -> training again on box 2: {training_again:.1f} s")


def test_a_continuation_is_refused_before_anything_moves_when_it_cannot_restore(
    bob, make_run, project, boxes, second_sshd
):
    box1, box2 = boxes
    run = make_run(state=RunState.QUARANTINED, attempt=1)
    with pytest.raises(ValidationError, match="No durable checkpoint of this run is known"):
        do_continue_elsewhere(run.pk, box2.pk, actor=bob)
    entry = {"name": "latest.pth", "file": "000001-latest.pth", "sha256": "a" * 64, "bytes": 1, "step": 2, "seq": 1}
    run.durable_ckpt = {"files": {"latest.pth": entry}, "seq": 1}
    run.save()
    with pytest.raises(ValidationError, match="the run's own box"):
        do_continue_elsewhere(run.pk, box1.pk, actor=bob)
    box2.mirror_root = ""
    box2.save()
    with pytest.raises(ValidationError, match="has no durable root"):
        do_continue_elsewhere(run.pk, box2.pk, actor=bob)
    # An operator never reaches the control host by continuing a run onto a box that is the control host.
    here = factories.box(name=f"{project.slug}-local-20261202", project=project, profile_key="local")
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_continue_elsewhere(run.pk, here.pk, actor=bob)
    other = Instance.objects.exclude(project=project).first()
    if other is not None:
        with pytest.raises(ValidationError, match="Choose a box of the run's project"):
            do_continue_elsewhere(run.pk, other.pk, actor=bob)
    run.refresh_from_db()
    assert run.state == RunState.QUARANTINED and run.instance_id == box1.pk and run.moves == []


@pytest.fixture
def boot_marker(node):
    yield node.root.parent / ".remotegpu-boot"
    (node.root.parent / ".remotegpu-boot").unlink(missing_ok=True)


def test_a_command_that_ignores_its_checkpoint_is_a_broken_resume_and_is_not_relaunched_again(
    bob, make_run, node, source, boxes, boot_marker, gate, celery_worker_process
):
    # Attempt 1 held at epoch 3 until interrupted; attempt 2 held at its first epoch (never released),
    # so its first checkpoint (epoch 1 again, below the floor) is the one the mirror copies.
    set_config(source, epochs=60, hold_file=gate.hold(at=3).path)
    edit_train(source, "if rank == 0 and os.path.exists(latest) and not smoke:", "if False:  # never resumes")
    run = make_run(auto_relaunch=True, max_relaunches=3)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    wait_durable(run, 3)
    gate.hold(at=1)
    interrupt(node, run, epochs=3)

    from watching.tasks import arm_watchers

    # Interruption seen, relaunched, and the new attempt's first checkpoint mirrored: 25 s alone.
    wait_until(
        lambda: run.refresh_from_db() or run.resume_broken,
        240,
        0.5,
        what=lambda: (
            f"no broken resume: {run.state} attempt {run.attempt} floor {run.resume_floor} "
            f"durable {run.durable_ckpt} events {list(run.events.values_list('message', flat=True))[-8:]}"
        ),
        between=arm_watchers,
    )
    assert run.attempt == 2 and run.resume_floor >= 3
    assert "started again instead of resuming" in run.resume_broken
    assert Notification.objects.filter(project=run.project, event=Event.RUN_CHECKPOINT).exists()
    wait_file(node.active(run) / "attempt-2" / "pid")
    (node.root.parent / ".remotegpu-boot").write_text(uuid.uuid4().hex)
    pids = map(int, (node.active(run) / "attempt-2" / "pid").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    run = wait_state(run, {RunState.QUARANTINED}, timeout=120, refresh=True)
    time.sleep(3)  # a watcher tick or two later: still not relaunched
    run.refresh_from_db()
    assert run.state == RunState.QUARANTINED and run.attempt == 2 and run.relaunches == 1
    messages = list(run.events.values_list("message", flat=True))
    assert any("not relaunched automatically: resume broken" in m for m in messages)


def test_the_run_page_offers_the_move_and_bad_input_changes_nothing(client, bob, make_run, boxes):
    box1, box2 = boxes
    entry = {"name": "latest.pth", "file": "000004-latest.pth", "sha256": "b" * 64, "bytes": 9, "step": 4, "seq": 4}
    run = make_run(state=RunState.QUARANTINED, attempt=1, durable_ckpt={"files": {"latest.pth": {**entry, "at": 1.0}}})
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Continue on another box" in page and f'value="{box2.pk}"' in page and f'value="{box1.pk}"' not in page
    assert "000004-latest.pth" not in page and "of step <strong>4</strong>" in page
    url = f"/runs/{run.run_id}/continue/"
    for instance in ("", "x", str(box1.pk), "999999"):
        answer = client.post(url, {"instance": instance}, follow=True)
        assert answer.status_code == 200
        assert any(word in answer.content.decode() for word in ("Choose a box", "own box"))
    run.refresh_from_db()
    assert run.state == RunState.QUARANTINED and run.instance_id == box1.pk and run.moves == []


def test_trainerfit_with_the_helper_continues_on_another_box_from_its_declared_folder_and_verifies(
    bob, make_run, node, boxes, tmp_path, celery_worker_process
):
    """The helper path of a Trainer-style script (examples/trainerfit/train_rg.py: three lines, its
    `checkpoint-<step>/` folders declared): the folder is bridged into ckpt/ as one tar, mirrored to the
    durable tier, and put back in out/ on box 2 before the command starts with its declared
    resume_args; the helper writes train.csv and the export (test "eval"), which verifies."""
    box1, box2 = boxes
    source = copied(TRAINERFIT)
    hold = tmp_path / "hold"
    hold.write_text("20\n")  # held after its save at step 20 until box 1 is lost
    command = [sys.executable, "train_rg.py", f"--hold_file={hold}"]
    run = make_run(source_path=str(source), command=command, config_path="train_rg.py", trainer_files=TRAINERFIT_FILES)
    rollups.add(run, runs=1)  # as do_create_run counts it: the move carries it to box 2
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING, run.close_reason
    assert "remotegpu_run: the smoke writes no export" in run.smoke_output

    from watching.tasks import arm_watchers

    folder = "declared-dir-out%2Fcheckpoint-20.tar"  # checkpoint-20/ bridged into ckpt/ as one tar
    wait_until(lambda: durable_copy(run, folder), 90, 0.5, what=lambda: run.durable_ckpt, between=arm_watchers)
    lose_box(node, run)
    hold.unlink()
    continue_on(run, box2, bob)
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE}, timeout=240, refresh=True)
    assert run.state == RunState.EXPORTED and run.instance_id == box2.pk, (run.state, run.close_reason)
    box2_root = on_this_machine(SECOND_ROOT) / run.project.slug
    log = (box2_root / "active" / run.run_id / "attempt-2" / "log.txt").read_text()
    assert "Continuing training from checkpoint out/checkpoint-20, global step 20" in log
    export = box2_root / "export" / run.run_id
    assert json.loads((export / "run.json").read_text())["tests"] == ["eval"]
    with open(export / "train.csv") as handle:
        assert [int(row["step"]) for row in csv.DictReader(handle)][-2:] == [45, 48]
    record = do_start_verification(run.pk, actor=bob)
    wait_until(lambda: record.refresh_from_db() or record.status in ("verified", "failed"), 120, 0.3, what="custody")
    assert record.status == CustodyStatus.VERIFIED, record.failure
    recomputed = {(m["test"], m["name"]): m["within_tolerance"] for m in record.evidence["metrics"]}
    assert recomputed == {("eval", "accuracy"): True, ("eval", "loss"): True}
    shutil.rmtree(source, ignore_errors=True)
