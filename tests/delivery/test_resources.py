"""Billable resources beyond the instance: a network volume, filesystem, storage, IP or
snapshot is registered with its rate and clock, counts in spend until deleted, shows when it outlives
its box, and deleting it is an L3 consequence with the custody rules of evidence deletion: it is
refused while it holds the last verified copy of an export."""

import time
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from custody.models import EvidenceLocation
from delivery.actions.base import TeardownRefused
from delivery.actions.decisions import do_approve_teardown
from delivery.actions.execution import do_attest_teardown
from delivery.actions.requests import do_request_teardown
from delivery.execution import execute
from delivery.models import TeardownKind, TeardownStatus
from delivery.tasks import prove_teardown
from fleet.actions import do_register_resource
from tests.custody import sealed
from tests.worker_env import NODE_ROOT

pytestmark = pytest.mark.django_db(transaction=True)

NODE, CUSTODY, MIRROR = EvidenceLocation.NODE, EvidenceLocation.CUSTODY, EvidenceLocation.MIRROR


@pytest.fixture
def pod(instance, no_worker):
    """The loopback box as a RunPod pod: runs on the volume disk, mirrors on the network volume."""
    instance.profile_key, instance.data_root_override = "runpod", NODE_ROOT
    instance.data_tier, instance.mirror_tier, instance.mirror_root = "volume disk", "network volume", sealed.MIRROR_ROOT
    instance.save()
    return instance


def volume(pod, bob):
    return do_register_resource(pod.pk, "network_volume", "vol-a", "network volume", Decimal("0.07"), "nv1", actor=bob)


@pytest.mark.parametrize(
    ("kind", "tier", "rate", "problem"),
    [
        ("static_ip", "", Decimal(1), "bills no such resource separately"),  # RunPod has no static IPs
        ("network_volume", "attic", Decimal(1), "no storage tier named"),
        ("network_volume", "", Decimal(-1), "zero or more"),
    ],
)
def test_registration_refuses_what_the_platform_does_not_bill(pod, bob, kind, tier, rate, problem):
    with pytest.raises(ValidationError, match=problem):
        do_register_resource(pod.pk, kind, "x", tier, rate, actor=bob)
    assert not pod.resources.exists()


def test_deleting_a_volume_that_holds_the_last_verified_copy_is_refused(pod, alice, bob, exported):
    run = exported()
    sealed.verify(run, mirror=True)
    resource = volume(pod, bob)
    request = do_request_teardown(pod.pk, TeardownKind.DELETE_EVIDENCE, "space", run, CUSTODY, actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execute(request.pk) == "deleted"
    request = do_request_teardown(pod.pk, TeardownKind.DELETE_EVIDENCE, "space", run, NODE, actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execute(request.pk) == "deleted"
    # Only the mirror on the network volume is left: deleting the volume would destroy it.
    with pytest.raises(TeardownRefused, match=f"A verified copy of {run.run_id} survives"):
        do_request_teardown(pod.pk, TeardownKind.DELETE_RESOURCE, "cost", resource=resource, actor=bob)


def test_a_volume_deletion_is_l3_attested_and_counts_its_copies_gone(pod, alice, bob, client, exported):
    run = exported()
    sealed.verify(run, mirror=True)
    resource = volume(pod, bob)
    client.force_login(bob)
    page = client.get(f"/instances/{pod.pk}/").content.decode()
    assert f'id="button-delete-resource-{resource.pk}"' in page and "bills per GB every hour" in page
    response = client.post(
        f"/instances/{pod.pk}/teardown/",
        {"kind": "delete_resource", "resource": resource.pk, "reason": "experiment over"},
    )
    request = resource.teardown_requests.get()
    assert response.status_code == 302 and (request.level, request.status) == ("L3", TeardownStatus.CHECKING)
    assert prove_teardown(request.pk) == TeardownStatus.PENDING
    request.refresh_from_db()
    items = {item["label"]: item for item in request.check_at_request["items"]}
    assert items[f"A verified copy of {run.run_id} survives"]["ok"]  # the custody copy survives it
    assert items["What deleting it destroys"]["detail"].startswith("network volume")
    with pytest.raises(Exception, match="never approves|requester"):
        do_approve_teardown(request.pk, "mine", actor=bob)
    do_approve_teardown(request.pk, "ok", actor=alice)
    assert execute(request.pk) == "awaiting attestation"  # no adapter deletes storage: the console does
    request.refresh_from_db()
    assert any("nv1" in step for step in request.provider_answer["console_steps"])
    do_attest_teardown(request.pk, actor=bob)
    started = time.monotonic()
    assert execute(request.pk) == "attested"
    assert time.monotonic() - started < 10  # it never waits for the box to go offline: it stays up
    resource.refresh_from_db()
    request.refresh_from_db()
    record = run.custody_records.get()
    assert request.status == TeardownStatus.DONE and resource.deleted_at is not None
    assert request.offline_verified is None
    assert record.mirror_deleted_at is not None and record.copy_deleted_at is None


def test_a_volume_outliving_its_box_shows_and_counts_in_spend(pod, bob, client):
    from runs.spend import envelope_of

    project = pod.project
    project.budget = Decimal(100)
    project.save()
    resource = volume(pod, bob)
    pod.state = "released"
    pod.save()
    client.force_login(bob)
    page = client.get("/").content.decode()
    assert 'id="orphan-resources"' in page and resource.name in page
    assert envelope_of(project).burn == Decimal("0.07")
