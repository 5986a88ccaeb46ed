"""An instance's billing state comes from evidence: a probe that ran a command on the box, or a run
launched there, means running; silence moves nothing; a released box stays released."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest

from fleet.actions import do_change_instance_state, do_observe_running
from fleet.costs import accrued_cost
from fleet.models import Instance, InstanceEvent, InstanceProbe
from fleet.tasks import probe_instance, probe_running_instances
from tests import factories
from tests.personas import join
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def project(bob):
    project = factories.project(name="Observed", slug=f"obs{uuid.uuid4().hex[:8]}")
    join(project, bob)
    return project


@pytest.fixture
def box(project, sshd):
    fields = {**sshd.instance_fields(project), "state": "unknown"}
    return factories.box(
        name=f"{project.slug}-observed-20261130",
        project=project,
        **fields,
        rate_running=Decimal("0.50"),
        rate_stopped=Decimal("0.05"),
    )


def observed(box) -> list[str]:
    states = box.events.filter(kind=InstanceEvent.Kind.STATE).order_by("at", "id")
    return list(states.values_list("message", flat=True))


def test_a_probe_that_ran_a_command_moves_unknown_to_running_and_cost_accrues(client, bob, box):
    assert accrued_cost(box).total == 0  # unknown bills nothing we can name
    probe_instance(box.pk, InstanceProbe.Kind.LIGHT)
    box.refresh_from_db()
    assert box.state == "running"
    assert observed(box) == ["State Unknown → Running: observed (connection test ran a command on it)"]
    since = box.events.get(kind=InstanceEvent.Kind.STATE).at  # the database's clock, not ours
    assert accrued_cost(box, now=since + timedelta(hours=3)).total == Decimal("1.50")
    wait_until(lambda: accrued_cost(box).running_hours > 0, what="running time to accrue")
    client.force_login(bob)
    page = client.get(box.get_absolute_url()).content.decode()
    assert "Accrued on this box" in page and "State Unknown → Running: observed" in page

    probe_instance(box.pk, InstanceProbe.Kind.LIGHT)  # already running: no second event
    assert len(observed(box)) == 1


def test_an_unreachable_box_moves_nowhere_and_a_released_one_never_comes_back(box):
    port = box.port
    Instance.objects.filter(pk=box.pk).update(port=1)  # nothing listens: unreachable
    probe_instance(box.pk, InstanceProbe.Kind.LIGHT)
    box.refresh_from_db()
    assert box.state == "unknown" and observed(box) == []

    Instance.objects.filter(pk=box.pk).update(port=port)
    do_change_instance_state(box.pk, "released", "gone", actor=None)
    do_observe_running(box.pk, "a run launched on it")
    box.refresh_from_db()
    assert box.state == "released"


def test_a_stopped_box_seen_answering_bills_as_running_again(box):
    do_change_instance_state(box.pk, "stopped", "shut down", actor=None)
    do_observe_running(box.pk, "run r-1 launched on it")
    box.refresh_from_db()
    assert box.state == "running"
    assert observed(box)[-1] == "State Stopped → Running: observed (run r-1 launched on it)"


def test_beat_probes_every_box_that_may_bill(box, project, no_worker):
    factories.box(name=f"{project.slug}-gone-20261130", project=project, state="released")
    factories.box(name=f"{project.slug}-off-20261130", project=project, state="stopped")
    assert probe_running_instances() == 2  # the unknown box and the stopped one, never the released


def test_a_console_only_box_asks_a_person_when_it_matters(client, bob, box):
    """No provider API answers for a console-only box: the page asks while its state is unknown, and
    again when it runs with nothing of ours on it; the answer is audited."""
    from fleet.models import Instance

    Instance.objects.filter(pk=box.pk).update(profile_key="autodl", state="unknown")
    client.force_login(bob)
    page = client.get(f"/instances/{box.pk}/").content.decode()
    assert 'id="confirm-with-console"' in page and "AutoDL has no API" in page
    client.post(f"/instances/{box.pk}/state/", {"state": "running", "reason": "confirmed in the AutoDL console"})
    assert 'id="confirm-with-console"' in client.get(f"/instances/{box.pk}/").content.decode()  # idle, running
    client.post(f"/instances/{box.pk}/state/", {"state": "running", "reason": "confirmed in the AutoDL console"})
    box.refresh_from_db()
    assert box.state == "running"
    assert box.events.filter(kind="note", message__startswith="Confirmed Running").exists()
    Instance.objects.filter(pk=box.pk).update(profile_key="runpod")  # the provider's API answers instead
    assert 'id="confirm-with-console"' not in client.get(f"/instances/{box.pk}/").content.decode()
