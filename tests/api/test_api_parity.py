"""API parity for the everyday verbs: PATCH a draft run (the form's rules), list, create and
read sweeps; a member without the role gets 403, an outsider 404, bad input a 4xx JSON."""

import json

import pytest
from django.test import Client

from api.models import ApiToken
from runs.models import Run, RunState, Sweep

pytestmark = pytest.mark.django_db


def api(user) -> Client:
    _, token = ApiToken.objects.issue(user, "test")
    return Client(HTTP_AUTHORIZATION=f"Token {token}")


def patch(client, path, body):
    return client.patch(path, data=json.dumps(body), content_type="application/json")


def test_a_draft_is_patched_by_the_form_rules(bob, carol, dave, make_run):
    run = make_run(title="before", expected_minutes=5)
    client = api(bob)
    answer = patch(client, f"/api/runs/{run.run_id}/", {"title": "after", "expected_minutes": 30, "scratch_mib": 2})
    assert answer.status_code == 200, answer.content
    assert set(answer.json()["changed"]) == {"title", "expected_minutes", "scratch_bytes"}
    run.refresh_from_db()
    assert (run.title, run.expected_minutes, run.scratch_bytes) == ("after", 30, 2 * 1024**2)
    assert run.events.filter(kind="edited").exists()  # audited as the Edit page is

    # The form's rules: a bad command, an unknown field, the project itself, a non-integer.
    for body in ({"command": []}, {"nosuch": 1}, {"project": "other"}, {"expected_minutes": "soon"}):
        refused = patch(client, f"/api/runs/{run.run_id}/", body)
        assert refused.status_code == 400 and "error" in refused.json(), (body, refused.content)
    assert Run.objects.get(pk=run.pk).title == "after"  # nothing half-written

    # What ran keeps what it ran.
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING)
    assert patch(client, f"/api/runs/{run.run_id}/", {"title": "x"}).status_code == 400
    assert patch(api(carol), f"/api/runs/{run.run_id}/", {"title": "x"}).status_code == 403
    assert patch(api(dave), f"/api/runs/{run.run_id}/", {"title": "x"}).status_code == 404


def test_sweeps_are_created_listed_and_read(bob, carol, dave, make_run, instance):
    base = make_run()
    client = api(bob)
    body = {"name": "lr", "base_run": base.run_id, "cells": [{"lr": 0.1}, {"lr": 0.01}], "instances": [instance.name]}
    made = client.post("/api/sweeps/", data=json.dumps(body), content_type="application/json")
    assert made.status_code == 201, made.content
    sweep = made.json()
    assert [cell["overrides"] for cell in sweep["cells"]] == [{"lr": 0.1}, {"lr": 0.01}]
    assert Sweep.objects.get(pk=sweep["id"]).cells.count() == 2

    listed = client.get("/api/sweeps/").json()["results"]
    assert [item["id"] for item in listed] == [sweep["id"]]
    one = client.get(f"/api/sweeps/{sweep['id']}/").json()
    assert {cell["state"] for cell in one["cells"]} <= {state.value for state in RunState}

    for bad in (
        {**body, "cells": [{"nosuchkey": 1}]},
        {**body, "instances": ["no-such-box"]},
        {**body, "cells": "lr=0.1"},
        {**body, "base_run": "no-such-run"},
    ):
        refused = client.post("/api/sweeps/", data=json.dumps(bad), content_type="application/json")
        assert refused.status_code == 400 and "error" in refused.json(), (bad, refused.content)
    assert Sweep.objects.count() == 1

    carol_made = api(carol).post("/api/sweeps/", data=json.dumps(body), content_type="application/json")
    assert carol_made.status_code == 403
    assert api(dave).get(f"/api/sweeps/{sweep['id']}/").status_code == 404
    assert api(dave).get("/api/sweeps/").json()["results"] == []
