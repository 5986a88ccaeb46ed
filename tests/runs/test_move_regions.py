"""A move could leave its checkpoints behind: continuing on another box checked only that the target had
some durable root, so a run whose only checkpoint copy sat on a region-locked tier (a RunPod network
volume, a Lambda filesystem) was offered every box, and one in another region started from step 0. Now a
move is offered only to boxes that can read the run's durable checkpoints (the same platform, region
and volume, or any box when the control host holds a copy), and the others are named with why."""

import pytest
from django.core.exceptions import ValidationError

from runs import ckpt_pull, rollups
from runs.actions.moves import do_continue_elsewhere
from runs.ckpt_pull import CONTROL
from runs.models import RunState
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]

ENTRY = {"name": "latest.pth", "file": "000004-latest.pth", "sha256": "d" * 64, "bytes": 9, "step": 4, "seq": 4}


def _boxes(project):
    def runpod(region, volume="vol-a"):
        return factories.box(project, "runpod", state="running", region=region, durable_volume=volume)

    return {
        "source": runpod("EU-RO-1"),
        "other region": runpod("US-KS-2"),
        "other volume": runpod("EU-RO-1", "vol-b"),
        "lambda": factories.box(project, "lambda", state="running", region="us-east-1"),
        "same": runpod("eu-ro-1"),
        "unknown region": runpod(""),
        "unknown volume": runpod("EU-RO-1", ""),
    }


def _run(project, box, **durable):
    run = factories.run(
        box, project=project, state=RunState.QUARANTINED, attempt=1,
        durable_ckpt={"files": {"latest.pth": {**ENTRY, "at": 1.0}}, "seq": 4, **durable},
    )  # fmt: skip
    rollups.add(run, runs=1)
    return run


def test_a_move_out_of_the_region_of_a_region_locked_tier_is_refused_with_its_reason(project, bob, client, alice):
    boxes = _boxes(project)
    run = _run(project, boxes["source"])
    refusals = {
        "other region": "region-locked to EU-RO-1; {name} is in US-KS-2",
        "other volume": "The run's only checkpoint copy is on vol-a ({source}'s RunPod durable tier); {name} has vol-b",
        "lambda": "{source}'s RunPod durable tier, which a Lambda Cloud box cannot read",
        # Before: allowed, then failed at the restore after the new box's boot and preflight had billed.
        "unknown region": "and {name}'s region is not known: unknown is not the same",
        "unknown volume": "and {name}'s volume is not known: unknown is not the same",
    }
    for key, said in refusals.items():
        with pytest.raises(ValidationError) as refused:
            do_continue_elsewhere(run.pk, boxes[key].pk, actor=bob)
        assert said.format(name=boxes[key].name, source=boxes["source"].name) in " ".join(refused.value.messages)
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    offered = page.split('id="continue-elsewhere"')[1].split("</form>")[0]
    assert boxes["same"].name in offered and boxes["other region"].name not in offered
    assert f"Not offered: <strong>{boxes['other region'].name}</strong>" in page
    moved = do_continue_elsewhere(run.pk, boxes["same"].pk, actor=bob)  # its region, its volume: it reads them
    assert moved.state == RunState.PREFLIGHT and moved.instance_id == boxes["same"].pk


def test_a_copy_on_the_control_host_moves_anywhere(project, bob):
    boxes = _boxes(project)
    run = _run(project, boxes["source"], target=CONTROL)
    directory = ckpt_pull.control_dir(run)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ENTRY["file"]).write_bytes(b"123456789")
    moved = do_continue_elsewhere(run.pk, boxes["other region"].pk, actor=bob)
    assert moved.state == RunState.PREFLIGHT and moved.durable_ckpt["restore"]["from_control"]
