"""Checkpoints that outlive a box with no durable tier: the wrapper holds the newest one, hashed, and the
watcher pulls it to the control host while the run trains; box 1 is lost (its processes killed, its
active/ removed); the run continues on box 2 (no durable tier either) from the control host's copy,
uploaded there and hashed again at the restore, and seals an export that verifies. A box that lies
about the held checkpoint's bytes or hash leaves nothing on the control host under a final name."""

import csv
import hashlib
import shutil
import time

import pytest
from django.utils import timezone

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs import ckpt_pull, rollups
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from runs.tasks import pull_checkpoint
from tests import factories
from tests.runs.conftest import SETTLED, set_config, stop_processes_under, wait_state
from tests.runs.test_durable_resume import SECOND_ROOT, continue_on, lose_box, on_this_machine, second_sshd  # noqa: F401
from tests.waiting import wait_until
from watching.tasks import arm_watchers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bare_boxes(project, instance, second_sshd):  # noqa: F811
    """Two boxes with no durable root (a vast.ai instance disk, a Lambda box without a filesystem)."""
    assert not instance.mirror_root and not instance.profile.durable_root
    fields = {**second_sshd.instance_fields(project), "data_root_override": SECOND_ROOT}
    name = f"{project.slug}-bare2-{timezone.localdate():%Y%m%d}"
    box2 = factories.box(name=name, project=project, **fields)
    yield instance, box2
    root = on_this_machine(SECOND_ROOT) / project.slug
    if root.exists():
        stop_processes_under(root)
    shutil.rmtree(root, ignore_errors=True)


def on_control(run) -> dict | None:
    run.refresh_from_db()
    if run.durable_ckpt.get("target") != ckpt_pull.CONTROL:
        return None
    return (run.durable_ckpt.get("files") or {}).get("latest.pth")


def sha256_of(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_box_without_a_durable_tier_has_its_checkpoint_pulled_and_the_run_continues_from_it(
    bob, make_run, node, source, bare_boxes, gate, celery_worker_process
):
    box1, box2 = bare_boxes
    # Held at epoch 2 until the box is lost: however loaded the machine, both are pulled before it ends.
    set_config(source, epochs=20, hold_file=gate.hold(at=2).path)
    run = make_run()
    rollups.add(run, runs=1)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    running_at = time.monotonic()

    def seen():
        run.refresh_from_db()
        held = {name: entry.get("step") for name, entry in (run.ckpt_mirror.get("held") or {}).items()}
        return f"not both pulled: run {run.state}, box holds {held}, control {run.durable_ckpt}"

    # Both checkpoints a continuation restores (tinyfit's finish reads best.pth): latest of step 2 or more, best.
    pulled = lambda: (on_control(run) or {}).get("step", 0) >= 2 and "best.pth" in run.durable_ckpt["files"]  # noqa: E731
    wait_until(pulled, 180, 0.5, what=seen, between=arm_watchers)  # the run is held: a deadline, not a race
    both_pulled = time.monotonic() - running_at
    assert run.state == RunState.RUNNING, "the run ended before it could be lost"
    entry = on_control(run)
    copy = ckpt_pull.control_dir(run) / entry["file"]
    assert sha256_of(copy) == entry["sha256"]  # what the box hashed is what arrived here
    assert any("copied to the control host" in m for m in run.events.values_list("message", flat=True))
    lost_at = time.monotonic()
    lose_box(node, run)
    gate.release()

    continue_on(run, box2, bob)
    run = wait_state(run, {RunState.RUNNING, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}, refresh=True)
    training_again = time.monotonic() - lost_at
    assert run.state == RunState.RUNNING and run.instance_id == box2.pk, run.preflight_report.get("problems")
    floor = run.resume_floor
    assert floor >= entry["step"]
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=240, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    box2_active = on_this_machine(SECOND_ROOT) / run.project.slug / "active" / run.run_id
    log = (box2_active / "attempt-2" / "log.txt").read_text()
    assert f"resumed from epoch {floor}" in log and "epoch 1/20" not in log
    assert not any((box2_active / "ckpt-inbox").iterdir())  # the upload served its restore and is gone
    assert [int(row["epoch"]) for row in run.curve] == list(range(1, 21))
    export = on_this_machine(SECOND_ROOT) / run.project.slug / "export" / run.run_id
    with open(export / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 21))
    messages = list(run.events.values_list("message", flat=True))
    assert any("from the control host’s copy of the checkpoint latest.pth" in m for m in messages)

    record = do_start_verification(run.pk, actor=bob)
    wait_until(lambda: record.refresh_from_db() or record.status in ("verified", "failed"), 120, 0.3, what="custody")
    assert record.status == CustodyStatus.VERIFIED, record.failure
    print(f"\nrunning -> latest and best on the control host: {both_pulled:.1f} s")
    print(f"box lost -> training again on box 2 from the control host's copy: {training_again:.1f} s")


def test_a_box_lying_about_its_held_checkpoint_leaves_nothing_on_the_control_host(client, bob, make_run, node):
    run = make_run(state=RunState.RUNNING, attempt=1)
    outbox = node.active(run) / "ckpt-outbox"
    outbox.mkdir(parents=True)
    data = b"checkpoint bytes " * 4096
    right = hashlib.sha256(data).hexdigest()
    for sha in ("0" * 64, right):  # held under the hash the box claims for it
        (outbox / f"{sha[:16]}-latest.pth").write_bytes(data)
    held = {"name": "latest.pth", "step": 4, "at": time.time(), "asked": time.time(), "attempt": 1}
    directory = ckpt_pull.control_dir(run)
    lies = [({"sha256": "0" * 64, "bytes": len(data)}, "hash mismatch"), ({"sha256": right, "bytes": 10}, "more than")]
    for lie, match in lies:
        run.durable_ckpt = {"pull": {**held, **lie}}
        run.save()
        assert pull_checkpoint(run.pk, lie["sha256"]) == "failed"
        run.refresh_from_db()
        assert match in run.durable_ckpt["pull"]["error"] and run.durable_ckpt.get("files") is None
        assert not [path for path in directory.rglob("*") if path.is_file() and not path.name.startswith(".")]
        assert pull_checkpoint(run.pk, lie["sha256"]) == "not asked"  # failed: asked again only by the watcher
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="control-pull"' in page and "to the control host failed: HashMismatch" in page
    run.durable_ckpt = {"pull": {**held, "sha256": right, "bytes": len(data)}}
    run.save()
    assert pull_checkpoint(run.pk, right) == "pulled"
    run.refresh_from_db()
    entry = run.durable_ckpt["files"]["latest.pth"]
    assert run.durable_ckpt["target"] == ckpt_pull.CONTROL and run.durable_ckpt["pull"] is None
    assert (directory / entry["file"]).read_bytes() == data and entry["step"] == 4
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Newest copy on the control host" in page and right in page and 'id="control-pull"' not in page
