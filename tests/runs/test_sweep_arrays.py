"""A sweep's cells gathered into one Slurm job array (runs/actions/arrays.py): the last cell ready has it
submitted, a failed or unstarted cell does not hold it, one submit at a time sends it, and no cell waits
for ever (an array already sent, or a wait past SLURM_ARRAY_GATHER_SECONDS, sends the cell alone)."""

import pytest

from runs.actions import arrays
from runs.actions.sweeps import do_advance_sweep, do_create_sweep
from runs.models import Run, RunState
from tests import factories

pytestmark = pytest.mark.django_db

ACCOUNTED = {"slurm": {"accounting": True}}


@pytest.fixture
def sweep(project, bob):
    box = factories.box(project, "slurm")
    base = factories.run(box, scheduler={"options": {"partition": "low"}})
    made = do_create_sweep(base, "lr", [{"lr": 0.1}, {"lr": 0.2}, {"lr": 0.3}], [box], 2, True, actor=bob)
    Run.objects.filter(sweep=made).update(attempt=1, preflight_report=ACCOUNTED)
    return made


def cells_of(sweep) -> list[Run]:
    return list(Run.objects.filter(sweep=sweep).select_related("sweep").order_by("cell"))


def put(cell: Run, state: RunState) -> None:
    Run.objects.filter(pk=cell.pk).update(state=state)


def submits(callbacks) -> list[tuple]:
    return [callback.args for callback in callbacks if callback.args[0] == "runs.tasks.submit_sweep_array"]


def test_the_last_ready_cell_has_the_array_submitted_and_a_failed_or_unstarted_cell_does_not_hold_it(
    sweep, django_capture_on_commit_callbacks
):
    one, two, three = cells_of(sweep)
    assert sweep.array == {"wanted": True} and all(arrays.wants_array(cell) for cell in (one, two, three))
    put(one, RunState.LAUNCHING)
    put(two, RunState.SMOKE)
    with django_capture_on_commit_callbacks() as callbacks:
        assert arrays.do_ready_array_cell(one.pk, 1) == arrays.WAIT
    assert submits(callbacks) == []  # cell 2 may still join
    assert "waits for sweep lr's other cells" in one.events.last().message
    put(two, RunState.FAILED_SMOKE)  # out; cell 3 waits for an approver (a draft): neither holds the array
    with django_capture_on_commit_callbacks() as callbacks:
        assert arrays.do_ready_array_cell(one.pk, 1) == arrays.WAIT
    assert submits(callbacks) == [("runs.tasks.submit_sweep_array", sweep.pk)]
    claimed = arrays.do_claim_array(sweep.pk)
    assert [cell.cell for cell in claimed] == [1]
    assert arrays.do_claim_array(sweep.pk) == []  # one submit at a time
    arrays.do_release_array_claim(sweep.pk)  # it failed: a retry may claim again
    assert [cell.cell for cell in arrays.do_claim_array(sweep.pk)] == [1]
    arrays.do_record_array(sweep.pk, "41", claimed, 2)
    sweep.refresh_from_db()
    assert sweep.array_job == "41" and sweep.array["cells"] == [1] and sweep.array["at_once"] == 2
    assert arrays.do_claim_array(sweep.pk) == []  # sent: never again
    assert "Goes as task 1 of job array 41" in one.events.last().message
    put(three, RunState.LAUNCHING)  # after the array: its own job
    assert arrays.do_ready_array_cell(three.pk, 1) == arrays.ALONE


def test_a_cell_dropping_out_after_the_others_are_ready_has_the_array_sent(sweep, django_capture_on_commit_callbacks):
    """The ready cells were waiting for cell 2's smoke; it failed: the sweep, advanced as a cell drops out,
    sends the array then (not at the gather deadline)."""
    one, two, three = cells_of(sweep)
    for cell in (one, three):
        put(cell, RunState.LAUNCHING)
    put(two, RunState.SMOKE)
    for cell in (one, three):
        assert arrays.do_ready_array_cell(cell.pk, 1) == arrays.WAIT
    put(two, RunState.FAILED_SMOKE)
    with django_capture_on_commit_callbacks() as callbacks:
        do_advance_sweep(sweep.pk)
    assert submits(callbacks) == [("runs.tasks.submit_sweep_array", sweep.pk)]


def test_a_cell_waits_no_longer_than_the_gather_deadline(sweep, settings):
    one, two, _ = cells_of(sweep)
    put(one, RunState.LAUNCHING)
    put(two, RunState.PREFLIGHT)  # staging a large dataset, say
    assert arrays.do_ready_array_cell(one.pk, 1) == arrays.WAIT
    settings.SLURM_ARRAY_GATHER_SECONDS = 0  # the launch deadline's re-drive comes past it
    assert arrays.do_ready_array_cell(one.pk, 1) == arrays.ALONE
    assert one.events.last().message.startswith("Waited for the sweep's job array long enough")
    assert arrays.do_ready_array_cell(one.pk, 2) == arrays.WAIT  # another attempt's call: nothing to launch


def test_only_a_first_attempt_on_a_cluster_with_accounting_joins_an_array(sweep):
    one, two, three = cells_of(sweep)
    Run.objects.filter(pk=two.pk).update(attempt=2)
    Run.objects.filter(pk=three.pk).update(preflight_report={"slurm": {"accounting": False}})
    assert [arrays.wants_array(cell) for cell in cells_of(sweep)] == [True, False, False]
    assert not arrays.wants_array(factories.run(one.instance, attempt=1, preflight_report=ACCOUNTED))  # no sweep
