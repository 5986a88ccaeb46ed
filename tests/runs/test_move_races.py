"""Moves race on PostgreSQL: two people continuing one run on two boxes at once, a person and the
provider's lost-box handling at once, a continuation beside an identical retry. One wins, the other is
told why, and the run holds one move, one attempt and one count of its runs on one box."""

import pytest
from django.db import connection

from fleet.actions import do_observe_provider_state
from runs import rollups
from runs.actions.lifecycle import do_retry_run
from runs.actions.moves import do_continue_elsewhere, do_handle_lost_box
from runs.models import InstanceTotals, RunState
from tests import factories
from tests.racing import at_once

pytestmark = pytest.mark.django_db(transaction=True)

ENTRY = {"name": "latest.pth", "file": "000004-latest.pth", "sha256": "d" * 64, "bytes": 9, "step": 4, "seq": 4}


@pytest.fixture
def movable(make_run, project, instance, no_worker):
    if connection.vendor != "postgresql":
        pytest.skip("row locks are what is raced")
    boxes = [factories.box(project, state="running", mirror_root="$HOME/durable") for _ in range(2)]

    def make(state=RunState.QUARANTINED, **fields):
        durable = {"files": {"latest.pth": {**ENTRY, "at": 1.0}}, "seq": 4, "instance_id": instance.pk}
        run = make_run(state=state, attempt=1, durable_ckpt=durable, **fields)
        rollups.add(run, runs=1)
        return run

    return make, boxes


def counted(box) -> int:
    totals = InstanceTotals.objects.filter(instance=box).first()
    return totals.runs if totals else 0


def test_two_people_continuing_one_run_on_two_boxes_make_one_move(bob, carol, movable, instance):
    make, (box2, box3) = movable
    run = make()
    outcomes = at_once(
        lambda: do_continue_elsewhere(run.pk, box2.pk, actor=bob).instance.name,
        lambda: do_continue_elsewhere(run.pk, box3.pk, actor=bob).instance.name,
    )
    assert len(outcomes) == 2
    won = [o for o in outcomes if o in (box2.name, box3.name)]
    lost = [o for o in outcomes if "cannot be continued elsewhere" in o]
    assert len(won) == 1 and len(lost) == 1, outcomes
    run.refresh_from_db()
    assert run.state == RunState.PREFLIGHT and run.instance.name == won[0] and len(run.moves) == 1
    assert [counted(box) for box in (instance, box2, box3)].count(1) == 1 and counted(run.instance) == 1


def test_a_person_and_the_lost_box_handling_at_once_move_the_run_once(bob, movable, instance):
    make, (box2, box3) = movable
    run = make(state=RunState.RUNNING, auto_relaunch=True, move_candidates=[box3.name])
    do_observe_provider_state(instance.pk, "gone", "runpod")
    outcomes = at_once(
        lambda: do_continue_elsewhere(run.pk, box2.pk, actor=bob, box_gone=True).instance.name,
        lambda: do_handle_lost_box(run.pk),
    )
    run.refresh_from_db()
    assert len(run.moves) == 1 and run.state == RunState.PREFLIGHT, outcomes
    if run.instance_id == box2.pk:  # the person first: the handling finds nothing running to move
        assert outcomes.count(box2.name) == 1 and any(o in ("nothing to do", "handled meanwhile") for o in outcomes)
        assert run.relaunches == 0
    else:  # the handling first: the person is told the run is no longer running
        assert f"continued on {box3.name}" in outcomes and any("cannot be continued" in o for o in outcomes)
        assert run.relaunches == 1
    assert "box_lost" not in run.alerts


def test_a_continuation_beside_an_identical_retry_is_one_or_the_other(bob, movable, instance):
    make, (box2, _) = movable
    run = make()
    outcomes = at_once(
        lambda: do_continue_elsewhere(run.pk, box2.pk, actor=bob).instance.name,
        lambda: do_retry_run(run.pk, actor=bob).state,
    )
    assert len(outcomes) == 2
    run.refresh_from_db()
    if run.instance_id == box2.pk:
        assert len(run.moves) == 1 and run.state == RunState.PREFLIGHT
    else:
        assert run.moves == [] and run.instance_id == instance.pk
    assert sum("cannot" in o or "Only" in o or "not" in o.lower() for o in outcomes) == 1, outcomes
