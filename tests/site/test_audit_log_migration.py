"""The six audit tables (passwords, members, roles, envelopes, credentials, notification variables) move
into the one log with their times, teardown's entries get their box's project, and all of it comes back
on the way down. On the CI database (PostgreSQL), from a populated database."""

from datetime import UTC, datetime

import pytest

from tests.migrating import migrate

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("migrated_copy")]

BEFORE = [
    ("custody", "0009_mirror_mount"),
    ("accounts", "0001_initial"),
    ("notifications", "0004_approval_webhooks_become_channels"),
    ("profiles", "0014_one_live_instance_per_provider_resource"),
    ("projects", "0006_approval_webhook_is_a_channel"),
]
AFTER = [
    ("accounts", "0002_into_the_one_log"),
    ("notifications", "0005_into_the_one_log"),
    ("profiles", "0015_into_the_one_log"),
    ("projects", "0007_into_the_one_log"),
]
THEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def populate(old):
    User = old.get_model("auth", "User")
    alice, erin = User.objects.create(username="alice"), User.objects.create(username="erin")
    project = old.get_model("projects", "Project").objects.create(name="Audio", slug="audio")
    rows = [
        old.get_model("accounts", "PasswordEvent")(user=erin, action="issued", actor=alice),
        old.get_model("projects", "MembershipEvent")(project=project, user=erin, action="added", actor=alice),
        old.get_model("projects", "RoleEvent")(
            project=project, user=erin, role="operator", action="granted", actor=alice
        ),
        old.get_model("projects", "EnvelopeEvent")(
            project=project, field="budget", before="", after="50.00", actor=alice
        ),
    ]
    credential = old.get_model("profiles", "Credential").objects.create(name="pod-key", kind="ssh_key", reference="x")
    rows.append(old.get_model("profiles", "CredentialEvent")(credential=credential, actor=alice, message="registered"))
    variable = old.get_model("notifications", "NotifyVariable").objects.create(variable="SLACK_URL")
    rows.append(old.get_model("notifications", "NotifyVariableEvent")(variable=variable, message="granted audio"))
    for row in rows:
        row.save()
        type(row).objects.filter(pk=row.pk).update(at=THEN)
    instance = old.get_model("profiles", "Instance").objects.create(name="pod-1", project=project, profile_key="runpod")
    old.get_model("custody", "AuditEntry").objects.create(action="hold_placed", message="hold", instance=instance)
    return project


def test_the_six_tables_become_the_one_log_and_come_back():
    old = migrate(BEFORE)
    project = populate(old)

    new = migrate(AFTER)
    entries = new.get_model("core", "AuditEntry").objects.order_by("action")
    got = {(e.action, e.message, e.project_id, e.subject.username if e.subject else None) for e in entries}
    assert got == {
        ("password.issued", "one-time password issued to erin", None, "erin"),
        ("member.added", "erin added to audio", project.pk, "erin"),
        ("role.granted", "operator granted to erin", project.pk, "erin"),
        ("envelope.changed", "budget: none → 50.00", project.pk, None),
        ("credential.changed", "pod-key: registered", None, None),
        ("variable.changed", "SLACK_URL: granted audio", None, None),
        ("hold_placed", "hold", project.pk, None),  # teardown's entry now names its box's project
    }
    assert {e.at for e in entries if e.action != "hold_placed"} == {THEN}
    assert entries.get(action="role.granted").data == {"role": "operator"}

    back = migrate(BEFORE)
    assert back.get_model("projects", "RoleEvent").objects.get().role == "operator"
    assert back.get_model("projects", "EnvelopeEvent").objects.get().after == "50.00"
    assert back.get_model("accounts", "PasswordEvent").objects.get().at == THEN
    assert back.get_model("profiles", "CredentialEvent").objects.get().message == "registered"
    assert back.get_model("notifications", "NotifyVariableEvent").objects.get().message == "granted audio"
    assert back.get_model("projects", "MembershipEvent").objects.get().action == "added"
    assert list(back.get_model("custody", "AuditEntry").objects.values_list("action", flat=True)) == ["hold_placed"]
