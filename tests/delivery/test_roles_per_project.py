"""Roles per project: an approver of project A decides nothing of project B's, through
the pages, the API or the sockets, and is not mailed B's requests.

Vision (A) and Audio (B). alice approves and operates in Vision and is a member of Audio without a
role (she sees its history); erin approves in Vision only and is not a member of Audio; bob operates
in Audio and asks; dave is Audio's approver.
"""

from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from delivery.actions.decisions import do_approve_teardown
from delivery.actions.requests import do_request_teardown
from delivery.models import TeardownRequest, TeardownStatus
from fleet.live import instance_changed
from fleet.models import Instance
from notifications.actions import recipients
from notifications.models import Notification
from projects.models import Project
from remotegpu_site.asgi import application
from runs.actions.lifecycle import do_start_preflight
from runs.actions.spending import SpendPending, do_decide_spend
from runs.models import SpendRequest, SpendStatus
from tests import factories
from tests.personas import grant, join
from tests.provider_stub import api_credential
from tests.runs.test_live_channel import ORIGIN, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _in_process_only(no_worker):
    """Approvals enqueue executions: no worker takes them while these tests look."""


@pytest.fixture
def world(alice, bob, dave, erin):
    vision = factories.project(name="Vision", slug="vision")
    audio = factories.project(name="Audio", slug="audio")
    join(vision, alice, erin)
    grant(alice, audio)  # a member of Audio, with no role in it
    join(audio, bob)
    grant(dave, audio, "approver")
    boxes = {
        project.slug: factories.box(
            name=f"{project.slug}-pod-20261201",
            project=project,
            profile_key="runpod",
            host="203.0.113.9",
            user="root",
            provider_id=f"pod-{project.slug}",
            api_credential=api_credential(project),
            state="running",
        )
        for project in (vision, audio)
    }
    request = do_request_teardown(boxes["audio"].pk, "release", "finished with it", actor=bob)
    run = factories.run(
        run_id="audio-r1",
        project=audio,
        instance=boxes["audio"],
        source_kind="node_path",
        source_path="/srv/x",
        command=["true"],
        config_path="c.yaml",
        expected_minutes=360,
    )
    # Six hours at $2/h against a $5 per-run threshold: bob's start waits for one of Audio's approvers.
    Project.objects.filter(pk=audio.pk).update(run_cost_threshold=Decimal("5"))
    Instance.objects.filter(pk=boxes["audio"].pk).update(rate_running=Decimal("2"))
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)
    spend = SpendRequest.objects.get(run=run)
    return {"vision": vision, "audio": audio, "boxes": boxes, "request": request, "run": run, "spend": spend}


def test_an_approver_of_another_project_cannot_decide_in_the_pages(client, world, alice, erin):
    request, spend = world["request"], world["spend"]
    client.force_login(alice)  # a member of Audio: she sees its requests, and decides none of them
    queue = client.get(reverse("approval-queue")).content.decode()
    assert f'id="request-{request.pk}"' in queue and "An approver of Audio decides this." in queue
    assert f'id="approve-spend-{spend.pk}"' not in queue
    detail = client.get(request.get_absolute_url()).content.decode()
    assert 'name="decision" value="approve"' not in detail
    assert client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "approve"}).status_code == 403
    refused = client.post(reverse("spend-decide", args=[spend.pk]), {"decision": "approve"})
    assert refused.status_code == 403 and "This needs the approver role in project Audio." in refused.content.decode()

    client.force_login(erin)  # not a member of Audio: its requests do not exist for her
    assert f'id="request-{request.pk}"' not in client.get(reverse("approval-queue")).content.decode()
    assert client.get(request.get_absolute_url()).status_code == 404
    assert client.post(reverse("teardown-decide", args=[request.pk]), {"decision": "approve"}).status_code == 404
    assert client.post(reverse("spend-decide", args=[spend.pk]), {"decision": "approve"}).status_code == 404

    assert TeardownRequest.objects.get(pk=request.pk).status == TeardownStatus.PENDING
    assert SpendRequest.objects.get(pk=spend.pk).status == SpendStatus.PENDING


def test_the_actions_refuse_an_approver_of_another_project_and_let_the_projects_own(world, alice, erin, dave):
    request, spend = world["request"], world["spend"]
    for person in (alice, erin):
        with pytest.raises(PermissionDenied, match="approver of the box's project"):
            do_approve_teardown(request.pk, "not mine to decide", actor=person)
        with pytest.raises(PermissionDenied, match="Only an approver of project Audio"):
            do_decide_spend(spend.pk, True, "not mine to decide", actor=person)
    assert do_approve_teardown(request.pk, "ok", actor=dave).status == TeardownStatus.APPROVED
    assert do_decide_spend(spend.pk, False, "not now", actor=dave).status == SpendStatus.REJECTED


def test_an_approver_of_another_project_cannot_act_through_the_api(client, world, alice, erin):
    request, run = world["request"], world["run"]
    client.force_login(alice)
    assert client.get(f"/api/teardown/{request.pk}/").status_code == 200  # a member sees it
    refused = client.post(f"/api/runs/{run.run_id}/stop/")
    assert refused.status_code == 403 and "operator role in project audio" in refused.json()["detail"]
    created = client.post(
        "/api/teardown/",
        {"instance": world["boxes"]["audio"].name, "kind": "shutdown", "reason": "mine?"},
        content_type="application/json",
    )
    assert created.status_code == 403 and TeardownRequest.objects.count() == 1
    client.force_login(erin)
    assert client.get(f"/api/teardown/{request.pk}/").status_code == 404
    assert client.post(f"/api/runs/{run.run_id}/stop/").status_code == 404
    assert client.get("/api/teardown/").json()["results"] == []


def test_only_the_projects_approvers_are_told_of_its_requests(world, admin_user, alice, erin):
    admin_user.email = "admin@example.org"
    admin_user.save()
    told = Notification.objects.get(project=world["audio"], event="teardown.requested")
    assert recipients(told) == ["admin@example.org", "dave@example.org"]  # not alice or erin (Vision's)
    asked = Notification.objects.get(project=world["audio"], event="spend.approval")
    assert recipients(asked) == ["admin@example.org", "dave@example.org"]  # bob asked: never told himself
    alice.email = "alice@example.org"
    assert "alice@example.org" not in recipients(told)  # a member of Audio, not its approver


async def test_an_approver_of_another_project_hears_nothing_of_its_boxes(world, alice, erin):
    audio_box, vision_box = world["boxes"]["audio"], world["boxes"]["vision"]
    erin_cookie = await sync_to_async(session_cookie)(erin)
    refused = WebsocketCommunicator(
        application, f"/ws/instances/{audio_box.pk}/", headers=[(b"cookie", erin_cookie), ORIGIN]
    )
    connected, code = await refused.connect()
    assert not connected and code == 4403
    await refused.disconnect()  # the consumer ends here, not in a cancellation at teardown
    own = WebsocketCommunicator(
        application, f"/ws/instances/{vision_box.pk}/", headers=[(b"cookie", erin_cookie), ORIGIN]
    )
    assert (await own.connect())[0]
    alice_cookie = await sync_to_async(session_cookie)(alice)
    member = WebsocketCommunicator(
        application, f"/ws/instances/{audio_box.pk}/", headers=[(b"cookie", alice_cookie), ORIGIN]
    )
    assert (await member.connect())[0]
    await sync_to_async(instance_changed)(audio_box.pk)  # what a teardown request on Audio's box sends
    assert (await member.receive_json_from(timeout=20))["instance"] == audio_box.pk
    assert await own.receive_nothing(timeout=1)
    await own.disconnect()
    await member.disconnect()
