"""Teardown requests, holds and waste alarms moved from custody to the delivery app without losing a row
or a link: the tables keep their custody_ names, and the audit log's entries still name their request."""

import datetime as dt

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

BEFORE = [("custody", "0017_teardown_batch"), ("core", "0008_alter_auditentry_action")]
AFTER = [("custody", "0018_teardown_moves_to_delivery"), ("core", "0009_audit_request_moves_to_delivery")]


def test_requests_holds_alarms_and_their_audit_entries_survive_the_move():
    old = migrate(BEFORE)
    alice = old.get_model("auth", "User").objects.create(username="alice")
    project = old.get_model("projects", "Project").objects.create(name="Vision", slug="vision")
    box = old.get_model("profiles", "Instance").objects.create(name="pod-1", project=project, profile_key="runpod")
    soon = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
    request = old.get_model("custody", "TeardownRequest").objects.create(
        instance=box, kind="release", level="L3", requester=alice, reason="done", expires_at=soon
    )
    old.get_model("custody", "ReleaseHold").objects.create(
        instance=box, created_by=alice, reason="keep", retired_by_request=request
    )
    old.get_model("custody", "WasteAlarm").objects.create(
        instance=box, kind="idle", since=soon, threshold_minutes=30, hourly=1, accrued=2, suggested="shutdown",
        message="idle", request=request,
    )  # fmt: skip
    old.get_model("core", "AuditEntry").objects.create(action="requested", instance=box, request=request)
    new = migrate(AFTER)
    moved = new.get_model("delivery", "TeardownRequest").objects.get()
    assert (moved.pk, moved.instance.name, moved.kind, moved.requester.username) == (
        request.pk,
        "pod-1",
        "release",
        "alice",
    )
    assert new.get_model("delivery", "ReleaseHold").objects.get().retired_by_request_id == moved.pk
    assert new.get_model("delivery", "WasteAlarm").objects.get().request_id == moved.pk
    assert new.get_model("core", "AuditEntry").objects.get().request.reason == "done"
    assert "TeardownRequest" not in {model.__name__ for model in new.get_app_config("custody").get_models()}
