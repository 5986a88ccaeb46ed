"""An operator ran code on the control host. A `local` box an admin registered could be
*run on* by any operator of its project (registration and editing were admin-only, running was not):
the form offered it, the API took it, and preflight started it. Runs on a local box are an admin's."""

import json
import sys
import uuid

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from api.models import ApiToken
from runs.actions.lifecycle import do_create_run, do_retry_run, do_start_preflight
from runs.models import Run, RunState, SourceKind
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(project):
    return factories.box(name=f"{project.slug}-desk-20261201", project=project, profile_key="local")


def run_on(desk, source, state=RunState.DRAFT, **fields) -> Run:
    return factories.run(
        project=desk.project,
        instance=desk,
        source_kind=SourceKind.LOCAL_DIR,
        source_path=str(source),
        command=[sys.executable, "train.py"],
        config_path="config.yaml",
        run_id=f"{desk.project.slug}-{uuid.uuid4().hex[:8]}",
        state=state,
        **fields,
    )


def form(desk, source):
    return {
        "project": desk.project.pk,
        "instance": desk.pk,
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


def test_the_run_form_neither_offers_nor_takes_a_local_box_from_an_operator(client, bob, desk, source):
    client.force_login(bob)
    page = client.get(reverse("run-create")).content.decode()
    assert desk.name not in page
    response = client.post(reverse("run-create"), form(desk, source))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not Run.objects.exists()


def test_the_admin_runs_on_the_local_box(client, admin_user, desk, source):
    join(desk.project, admin_user)
    client.force_login(admin_user)
    assert desk.name in client.get(reverse("run-create")).content.decode()
    response = client.post(reverse("run-create"), form(desk, source))
    assert response.status_code == 302 and Run.objects.get().instance == desk


def test_the_api_refuses_an_operators_run_on_the_local_box(bob, desk, source):
    _, token = ApiToken.objects.issue(bob, "ci")
    body = {
        "project": desk.project.slug,
        "instance": desk.name,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command": [sys.executable, "train.py"],
        "config_path": "config.yaml",
    }
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.post("/api/runs/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and "only an administrator" in json.dumps(response.json())
    assert not Run.objects.exists()


def test_no_action_starts_an_operators_run_on_the_local_box(bob, admin_user, desk, source):
    """A run that exists already (made before this rule, or by an admin) is not the operator's to start."""
    draft = run_on(desk, source)
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_start_preflight(draft.pk, actor=bob)
    quarantined = run_on(desk, source, state=RunState.QUARANTINED, attempt=1)
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_retry_run(quarantined.pk, actor=bob)
    with pytest.raises(PermissionDenied, match="only an administrator"):
        do_create_run(Run(project=desk.project, instance=desk, command=["true"], source_path="/x"), actor=bob)
    draft.refresh_from_db()
    quarantined.refresh_from_db()
    assert (draft.state, quarantined.state, Run.objects.count()) == (RunState.DRAFT, RunState.QUARANTINED, 2)
    assert not draft.events.exists() and not quarantined.events.exists()
