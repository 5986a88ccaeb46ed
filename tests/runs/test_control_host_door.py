"""What may run on the control host: only a run an administrator wrote, started by an administrator or by
RemoteGPU itself, on any box of it (runs/actions/base.py: control_host_problem). Before: the rule was taken
against whoever clicked, once, and on the run's own box only: an operator's edit of an administrator's draft
ran on the control host at its proof or its next start, and an administrator's multi-node draft whose other
box was the local box was started, retried and edited by an operator, shipping her source there."""

import json

import pytest
from django.core.exceptions import PermissionDenied

from api.models import ApiToken
from runs.actions.lifecycle import do_create_run, do_edit_run, do_retry_run, do_start_preflight
from runs.models import Run, RunPeer, RunState
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(project):
    return factories.box(project, "local", name=f"{project.slug}-desk-20261207", state="running")


@pytest.fixture
def local_node_user(settings):
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, "nobody"  # a team deployment that runs there


def admins_draft(box, admin_user, **fields) -> Run:
    run = Run(project=box.project, instance=box, source_kind="node_path", source_path="/srv/src", expected_minutes=5)
    run.command, run.config_path = ["python3", "train.py"], "config.yaml"
    for key, value in fields.items():
        setattr(run, key, value)
    return do_create_run(run, actor=admin_user)


def test_an_operators_edit_of_an_admins_draft_never_starts_there(project, bob, admin_user, desk, local_node_user):
    run = admins_draft(desk, admin_user)
    do_edit_run(run.pk, {"command": ["sh", "-c", "cat /proc/1/environ"]}, actor=admin_user)
    assert Run.objects.get(pk=run.pk).definition_by == admin_user  # an administrator's edit keeps it runnable
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_edit_run(run.pk, {"command": ["sh", "-c", "id"]}, actor=bob)  # on the control host: refused outright
    run.refresh_from_db()
    assert run.command == ["sh", "-c", "cat /proc/1/environ"]  # nothing of the refused edit was kept


def test_a_run_an_operator_wrote_is_refused_on_the_control_host_to_an_admin_too(
    project, bob, admin_user, desk, box_row, local_node_user
):
    run = admins_draft(box_row, admin_user)
    do_edit_run(run.pk, {"command": ["sh", "-c", "id > /tmp/pwned"]}, actor=bob)  # on a box, fine
    with pytest.raises(PermissionDenied, match="last written by bob, not an administrator"):
        do_edit_run(run.pk, {"instance": desk}, actor=admin_user)  # moved to the control host: what bob wrote
    with pytest.raises(PermissionDenied, match="last written by bob"):
        Run.objects.filter(pk=run.pk).update(instance=desk)  # however it got there, no start takes it
        do_start_preflight(run.pk, actor=admin_user)
    assert Run.objects.get(pk=run.pk).state == RunState.DRAFT


def test_the_api_patch_is_the_same_edit(client, project, bob, admin_user, box_row, desk, local_node_user):
    run = admins_draft(box_row, admin_user)
    _, token = ApiToken.objects.issue(bob, "t")
    answer = client.patch(
        f"/api/runs/{run.run_id}/",
        data=json.dumps({"command": ["sh", "-c", "id"]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token}",
    )
    assert answer.status_code == 200, answer.content
    assert Run.objects.get(pk=run.pk).definition_by == bob
    Run.objects.filter(pk=run.pk).update(instance=desk)
    with pytest.raises(PermissionDenied, match="last written by bob"):
        do_start_preflight(run.pk, actor=admin_user)


def test_a_multinode_run_whose_other_box_is_the_control_host_is_an_admins_to_start(
    project, bob, admin_user, box_row, desk, local_node_user
):
    run = admins_draft(box_row, admin_user)
    RunPeer.objects.create(run=run, instance=desk, rank=1)
    for start in (do_start_preflight, do_retry_run):
        with pytest.raises(PermissionDenied, match="only an administrator"):
            start(run.pk, actor=bob)
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_edit_run(run.pk, {"command": ["sh", "-c", "id"]}, actor=bob)
    assert Run.objects.get(pk=run.pk).state == RunState.DRAFT


@pytest.mark.parametrize("what", ["released", "unconfirmed", "local"])
def test_the_apis_peer_boxes_are_checked_as_the_runs_own_box(client, project, bob, box_row, what, local_node_user):
    peer = factories.box(project, "local" if what == "local" else "generic-ssh", state="running")
    if what == "released":
        peer.state = "released"
        peer.host_key_base64, peer.host_key_type = box_row.host_key_base64, box_row.host_key_type
        peer.save()
    _, token = ApiToken.objects.issue(bob, "t")
    body = {
        "project": project.slug,
        "instance": box_row.name,
        "source_kind": "node_path",
        "source_path": "/srv/src",
        "command": ["python", "train.py"],
        "config_path": "config.yaml",
        "expected_minutes": 5,
        "peer_boxes": [peer.name],
    }
    answer = client.post(
        "/api/runs/", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Token {token}"
    )
    assert answer.status_code == 400 and "peer_boxes" in answer.json()["detail"], answer.content
    said = " ".join(answer.json()["detail"]["peer_boxes"])
    assert {"released": "is released", "unconfirmed": "host key first", "local": "only an administrator"}[what] in said
    assert not Run.objects.exists()
