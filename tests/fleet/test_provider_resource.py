"""A twin box terminated a guarded pod. A second box registered (or edited) with a guarded
pod's provider id had no exports, so its release passed every check and the provider terminated the
real pod. The unit of custody is the provider's resource: one live box per (platform, provider id)."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from fleet.actions import do_create_instance, do_edit_instance, do_register_resource
from fleet.models import Credential, CredentialKind, Instance
from runs.models import RunState
from tests import factories
from tests.racing import at_once

pytestmark = pytest.mark.django_db(transaction=True)

TODAY = timezone.localdate().strftime("%Y%m%d")
POD = "pod-7f3a9c"


@pytest.fixture
def projects(alice, bob, dave):
    vision = factories.project(alice, bob, name="Vision", slug="vision")
    audio = factories.project(dave, name="Audio", slug="audio")
    factories.credential(CredentialKind.SSH_KEY, "env:RUNPOD_SSH_KEY", vision, audio, name="runpod-ssh")
    return vision, audio


def box_form(project, name, provider_id):
    key = Credential.objects.get(name="runpod-ssh")
    return {
        "project": project.pk,
        "name": f"{project.slug}-{name}-{TODAY}",
        "profile_key": "runpod",
        "host": "203.0.113.7",
        "port": "22022",
        "user": "root",
        "credential": key.pk,
        "provider_id": provider_id,
        "rate_running": "1.89",
        "rate_stopped": "0.20",
        "acknowledge": "on",
    }


def guarded_pod(project, bob) -> Instance:
    """The real pod, with a run whose export sits on it unverified."""
    pod = factories.box(project, "runpod", name=f"{project.slug}-real-{TODAY}", provider_id=POD, state="running")
    factories.run(pod, state=RunState.EXPORTED, created_by=bob)
    return pod


def test_a_twin_of_a_guarded_pod_is_refused_in_its_project_and_in_another(client, bob, dave, projects):
    vision, audio = projects
    guarded_pod(vision, bob)
    client.force_login(bob)
    response = client.post(reverse("instance-create"), box_form(vision, "twin", POD))
    assert response.status_code == 200 and Instance.objects.count() == 1
    assert "one box per provider resource" in response.content.decode()
    client.force_login(dave)  # another project sharing the provider key: refused, and told nothing of Vision
    response = client.post(reverse("instance-create"), box_form(audio, "twin", POD))
    page = response.content.decode()
    assert response.status_code == 200 and Instance.objects.count() == 1
    assert "one box per provider resource" in page and "vision-real" not in page


def test_editing_a_box_onto_a_guarded_pod_is_refused_and_saves_nothing(client, bob, projects):
    vision, _ = projects
    guarded_pod(vision, bob)
    twin = factories.box(vision, "runpod", name=f"vision-twin-{TODAY}", state="running")
    with pytest.raises(ValidationError, match="one box per provider resource"):
        do_edit_instance(twin.pk, {"provider_id": POD, "rate_running": Decimal(9)}, actor=bob)
    twin.refresh_from_db()
    assert (twin.provider_id, twin.rate_running) == ("", 0)  # nothing half-written
    client.force_login(bob)
    edit = {k: v for k, v in box_form(vision, "twin", POD).items() if k not in ("project", "name", "profile_key")}
    response = client.post(f"/instances/{twin.pk}/edit/", edit)
    assert response.status_code == 200 and "one box per provider resource" in response.content.decode()
    assert Instance.objects.get(pk=twin.pk).provider_id == ""


def test_a_box_holding_evidence_keeps_its_provider_id(bob, projects):
    vision, _ = projects
    pod = guarded_pod(vision, bob)
    with pytest.raises(ValidationError, match="its provider id cannot change"):
        do_edit_instance(pod.pk, {"provider_id": "pod-other"}, actor=bob)
    with pytest.raises(ValidationError, match="its provider id cannot change"):
        do_edit_instance(pod.pk, {"provider_id": ""}, actor=bob)
    assert Instance.objects.get(pk=pod.pk).provider_id == POD
    unbound = factories.box(vision, "runpod", name=f"vision-new-{TODAY}")
    factories.run(
        project=vision, instance=unbound, run_id="vision-aaaaaa", source_path="/x", command=["true"], created_by=bob
    )
    assert do_edit_instance(unbound.pk, {"provider_id": "pod-mine"}, actor=bob) == ["provider_id"]  # none before


def test_a_released_pod_frees_its_id_and_other_platforms_do_not_collide(bob, projects):
    vision, _ = projects
    pod = guarded_pod(vision, bob)
    same_id_elsewhere = Instance(name=f"vision-vast-{TODAY}", project=vision, profile_key="vastai", provider_id=POD)
    do_create_instance(same_id_elsewhere, True, actor=bob)
    Instance.objects.filter(pk=pod.pk).update(state="released")
    successor = Instance(name=f"vision-next-{TODAY}", project=vision, profile_key="runpod", provider_id=POD)
    assert do_create_instance(successor, True, actor=bob).pk


def test_two_twins_registered_at_once_leave_one(alice, bob, projects):
    """On PostgreSQL both checks can pass before either row exists: the database's constraint decides."""
    vision, _ = projects

    def register(person, name):
        box = Instance(name=f"vision-{name}-{TODAY}", project=vision, profile_key="runpod", provider_id=POD)
        return do_create_instance(box, True, actor=person).name

    outcomes = at_once(lambda: register(alice, "one"), lambda: register(bob, "two"))
    assert len(outcomes) == 2, outcomes
    assert sum(outcome.startswith("vision-") for outcome in outcomes) == 1, outcomes
    assert sum("one box per provider resource" in outcome for outcome in outcomes) == 1, outcomes
    assert Instance.objects.filter(provider_id=POD).count() == 1


def test_a_resource_id_belongs_to_one_box(bob, projects):
    vision, _ = projects
    first = factories.box(vision, "runpod", name=f"vision-a-{TODAY}")
    second = factories.box(vision, "runpod", name=f"vision-b-{TODAY}")
    do_register_resource(first.pk, "network_volume", "data", "", Decimal("0.1"), "vol-1", actor=bob)
    with pytest.raises(ValidationError, match="one box per provider resource"):
        do_register_resource(second.pk, "network_volume", "data", "", Decimal("0.1"), "vol-1", actor=bob)
