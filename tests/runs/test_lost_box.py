"""A box its provider says is not running any more (a reclaimed spot box, a terminated pod): the
provider's reconciliation remembers it (only the provider clears it); a run still believed running
there is moved by itself to the first free box of its list when it opted in, from its newest durable
checkpoint, bounded by its relaunches; otherwise a material alert offers the move to a person, once.
The list is checked like every other field: the project's boxes only, never its own, never the control
host."""

import sys
import time

import pytest
from django.urls import reverse

from fleet.actions import do_observe_provider_state
from fleet.drift import do_reconcile_providers
from fleet.models import Instance
from notifications.models import Event, Notification
from runs import rollups
from runs.actions.lifecycle import do_start_preflight
from runs.actions.moves import do_handle_lost_box, free_candidate, lost_box_runs
from runs.models import Run, RunState
from runs.tasks import reconcile_runs
from tests import factories
from tests.provider_stub import GONE, RUNNING
from tests.runs.conftest import SETTLED, set_config, wait_state
from tests.runs.test_durable_resume import (  # noqa: F401
    boxes,
    durable_disk,
    durable_step,
    lose_box,
    second_sshd,
    wait_durable,
)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


@pytest.mark.django_db(transaction=True)
def test_the_provider_says_a_pod_is_gone_and_only_the_provider_says_it_runs_again(project, provider_api, no_worker):
    provider_api.add("runpod", "pod-spot")
    pod = factories.box(project, "runpod", api=True, provider_id="pod-spot", state="running")
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.provider_down == {}
    provider_api.states["pod-spot"] = GONE  # reclaimed: no longer listed, and its status says so
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.provider_down["state"] == "gone" and "runpod says gone" in pod.provider_down["evidence"]
    since = pod.provider_down["since"]
    do_reconcile_providers()  # said again: the same moment it went down
    pod.refresh_from_db()
    assert pod.provider_down["since"] == since
    assert pod.events.filter(message__contains="not running: runpod says gone").count() == 1
    provider_api.states["pod-spot"] = RUNNING
    do_reconcile_providers()
    pod.refresh_from_db()
    assert pod.provider_down == {}


@pytest.mark.django_db
def test_a_run_that_does_not_move_by_itself_is_offered_the_move_once(make_run, instance):
    run = make_run(state=RunState.RUNNING, attempt=1)
    assert lost_box_runs() == []
    do_observe_provider_state(instance.pk, "stopped", "vastai")
    assert lost_box_runs() == [run.pk]
    assert do_handle_lost_box(run.pk) == "offered"
    run.refresh_from_db()
    assert run.state == RunState.RUNNING and "box_lost" in run.alerts and run.moves == []
    event = run.events.filter(kind="alert").last()
    assert "vastai says stopped" in event.message and "does not relaunch by itself" in event.message
    assert Notification.objects.filter(project=run.project, event=Event.RUN_INTERRUPTED).count() == 1
    assert lost_box_runs() == [] and do_handle_lost_box(run.pk) == "nothing to do"  # once
    assert Notification.objects.filter(project=run.project, event=Event.RUN_INTERRUPTED).count() == 1


@pytest.mark.django_db
def test_the_first_free_box_of_the_list_is_chosen_and_none_free_is_said(make_run, project, instance):
    busy, down, free, later = (factories.box(project, state="running") for _ in range(4))
    make_run(instance=busy, state=RunState.RUNNING)
    do_observe_provider_state(down.pk, "gone", "lambda")
    run = make_run(
        state=RunState.RUNNING, auto_relaunch=True, move_candidates=[busy.name, down.name, free.name, later.name]
    )
    assert free_candidate(run) == free
    run.move_candidates = [busy.name, down.name, "renamed-since"]
    run.save()
    assert free_candidate(run) is None
    do_observe_provider_state(instance.pk, "gone", "lambda")
    assert do_handle_lost_box(run.pk) == "offered"
    assert "no box of its list is free" in run.events.filter(kind="alert").last().message


@pytest.mark.django_db
def test_the_list_of_boxes_is_checked_like_every_field(client, bob, project, instance, source):
    other_project_box = Instance.objects.exclude(project=project).first()
    here = factories.box(name=f"{project.slug}-local-x", project=project, profile_key="local")
    box2 = factories.box(project, state="running")
    form = {
        "project": project.pk,
        "instance": instance.pk,
        "title": "t",
        "source_kind": "local_dir",
        "source_path": str(source),
        "command_line": f"{sys.executable} train.py",
        "config_path": "config.yaml",
        "expected_minutes": "30",
        "checkpoint_mib": "100",
        "checkpoints_retained": "2",
        "scratch_mib": "0",
        "expected_files": "1000",
    }
    client.force_login(bob)
    refusals = [
        ("nowhere-box", "Not a box of"),
        (instance.name, "the run&#x27;s own box"),
        (here.name, "is the control host"),
        (", ".join(f"b{i}" for i in range(21)), "At most 20 boxes"),
    ]
    if other_project_box is not None:
        refusals.append((other_project_box.name, "Not a box of"))
    for value, error in refusals:
        answer = client.post(reverse("run-create"), {**form, "move_candidates_text": value})
        assert answer.status_code == 200 and error in answer.content.decode(), value
    assert not Run.objects.exists()
    client.post(reverse("run-create"), {**form, "move_candidates_text": f" {box2.name}, {box2.name} "})
    assert Run.objects.get().move_candidates == [box2.name]
    body = {
        "project": project.slug,
        "instance": instance.name,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command": [sys.executable, "train.py"],
        "config_path": "config.yaml",
        "move_candidates": [instance.name],
    }
    answer = client.post("/api/runs/", body, content_type="application/json")
    assert answer.status_code == 400 and "own box" in answer.json()["detail"]["move_candidates"][0]


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_provider_says_its_box_is_gone_continues_by_itself_on_the_first_free_box(
    bob,
    make_run,
    node,
    source,
    boxes,  # noqa: F811
    gate,
    celery_worker_process,
):
    box1, box2 = boxes
    set_config(source, epochs=12, hold_file=gate.hold(at=3).path)  # held at epoch 3 until the box is lost
    run = make_run(auto_relaunch=True, max_relaunches=2, move_candidates=[box2.name])
    rollups.add(run, runs=1)  # as do_create_run counts it: the move carries it to box 2
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    wait_durable(run, 3)
    seen = durable_step(run)
    lost_at = time.monotonic()
    lose_box(node, run)
    gate.release()
    do_observe_provider_state(box1.pk, "gone", "runpod")  # what the provider's reconciliation records
    assert reconcile_runs()[f"lost box {run.pk}"] == f"continued on {box2.name}"  # beat's next reconcile
    run = wait_state(run, {RunState.RUNNING, RunState.FAILED_PREFLIGHT, RunState.FAILED_SMOKE}, refresh=True)
    training_again = time.monotonic() - lost_at
    assert run.state == RunState.RUNNING and run.instance_id == box2.pk and run.attempt == 2
    assert run.relaunches == 1 and run.resume_floor >= seen
    assert run.moves[-1]["by"] == "RemoteGPU by itself" and "box_lost" not in run.alerts
    messages = list(run.events.values_list("message", flat=True))
    assert any(f"Moved by itself to {box2.name} (runpod says gone" in m for m in messages)
    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=240, refresh=True)
    assert run.state == RunState.EXPORTED, run.close_reason
    assert [int(row["epoch"]) for row in run.curve] == list(range(1, 13))
    print(f"\nprovider says gone -> training again on box 2 by itself: {training_again:.1f} s")
