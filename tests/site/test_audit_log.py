"""One audit log for every change to access, credentials, money and evidence: written by every action
that makes one, read together on /audit/ and in its exports, each person seeing what touched their
projects (an admin: everything). Until now /audit/ showed teardown only."""

import re
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied

from core.audit import record
from core.models import AuditEntry
from delivery.actions.holds import do_place_hold
from fleet.actions import do_create_instance, do_edit_instance, do_save_credential
from fleet.models import Credential, CredentialKind, Instance
from projects.membership import do_add_member
from runs.actions.lifecycle import SpendPending, do_start_preflight
from runs.actions.spending import do_decide_spend
from runs.budgets import do_set_envelope
from runs.models import SpendRequest
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(alice, bob, carol):
    return factories.project(alice, bob)


def changes_of_every_kind(project, alice, bob, admin_user):
    """A member added, the envelope set, a credential registered, a box registered and edited, a launch
    over the envelope approved, and a hold placed: one of each area."""
    do_add_member(project.pk, "carol", actor=bob)
    do_set_envelope(
        project.pk, {"budget": Decimal("5"), "budget_period": "month", "run_cost_threshold": None}, actor=bob
    )
    do_save_credential(
        Credential(name=f"{project.slug}-key", kind=CredentialKind.SSH_KEY, reference="env:K"),
        [project],
        actor=admin_user,
    )
    box = Instance(name=f"{project.slug}-box", project=project, profile_key="generic-ssh", rate_running=Decimal(2))
    do_create_instance(box, acknowledged=True, actor=bob)
    do_edit_instance(box.pk, {"host": "10.0.0.9"}, actor=bob)
    run = factories.run(box, expected_minutes=600, created_by=bob)
    with pytest.raises(SpendPending):
        do_start_preflight(run.pk, actor=bob)  # 10 h at $2/h is over the $5 envelope
    do_decide_spend(SpendRequest.objects.get(run=run).pk, True, "worth it", actor=alice)
    do_place_hold(box.pk, "keep the evidence", actor=alice)
    return box, run


def test_every_kind_of_change_is_in_the_one_log_filtered_and_exported_together(
    client, project, alice, bob, erin, admin_user
):
    box, run = changes_of_every_kind(project, alice, bob, admin_user)
    client.force_login(alice)
    rows = client.get("/audit/", {"format": "json"}).json()
    assert {row["action"] for row in rows} == {
        "member.added", "envelope.changed", "instance.created", "instance.edited", "spend.approved", "hold_placed",
    }  # fmt: skip
    assert {row["project"] for row in rows} == {project.slug}
    spend = next(row for row in rows if row["action"] == "spend.approved")
    assert (spend["actor"], spend["run"], spend["instance"]) == ("alice", run.run_id, box.name)
    assert "$20.00" in spend["message"] and "worth it" in spend["message"]
    added = next(row for row in rows if row["action"] == "member.added")
    assert (added["actor"], added["subject"]) == ("bob", "carol")

    money = client.get("/audit/", {"format": "json", "area": "money"}).json()
    assert {row["action"] for row in money} == {
        "envelope.changed",
        "instance.created",
        "instance.edited",
        "spend.approved",
    }
    csv_text = client.get("/audit/", {"format": "csv", "area": "access"}).content.decode()
    assert csv_text.splitlines()[0] == "at,action,actor,project,instance,run,request,subject,message"
    assert [line.split(",")[1] for line in csv_text.splitlines()[1:]] == ["member.added"]
    by_run = client.get("/audit/", {"format": "json", "run": run.run_id}).json()
    assert [row["action"] for row in by_run] == ["spend.approved"]
    page = client.get("/audit/", {"area": "evidence"}).content.decode()
    assert "keep the evidence" in page and "worth it" not in page

    # A credential belongs to no project: only an admin sees its registration. A stranger sees nothing.
    client.force_login(admin_user)
    everything = client.get("/audit/", {"format": "json", "area": "credentials"}).json()
    assert [row["message"] for row in everything] == [f"{project.slug}-key: Registered; granted to {project.slug}"]
    client.force_login(erin)
    assert client.get("/audit/", {"format": "json"}).json() == []


def test_the_log_refuses_what_is_not_an_action_and_any_change_to_an_entry(project, bob):
    with pytest.raises(ValueError, match="not an audit action"):
        record("made.up", "nothing", actor=bob, project=project)
    entry = record("member.added", "bob added", actor=bob, project=project, subject=bob)
    entry.message = "rewritten"
    with pytest.raises(ValueError, match="append-only"):
        entry.save()
    with pytest.raises(ValueError, match="append-only"):
        entry.delete()
    assert AuditEntry.objects.get().message == "bob added"


def test_a_refused_change_leaves_no_entry(project, carol):
    with pytest.raises(PermissionDenied):
        do_set_envelope(
            project.pk, {"budget": Decimal("1"), "budget_period": "month", "run_cost_threshold": None}, actor=carol
        )
    assert not AuditEntry.objects.exists()


def test_the_log_page_asks_the_same_few_queries_however_many_entries(client, project, alice, bob, admin_user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    changes_of_every_kind(project, alice, bob, admin_user)
    client.force_login(admin_user)

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/audit/").status_code == 200
        return len(seen)

    few = queries()
    box = project.instances.get()
    for n in range(20):
        record("instance.edited", f"edit {n}", actor=bob, instance=box, run=box.runs.first())
    assert queries() == few <= 8


def test_the_log_shows_a_page_at_a_time_with_the_filters_kept_and_exports_everything(client, project, bob, alice):
    from console.views import AUDIT_PAGE

    box = factories.box(project)
    for n in range(AUDIT_PAGE + 5):
        record("instance.edited", f"edit {n}", actor=bob, instance=box)
    client.force_login(alice)
    first = client.get("/audit/", {"area": "access"})  # no entry of that area: one empty page
    assert 'id="older"' not in first.content.decode() and "Nothing recorded." in first.content.decode()
    page = client.get("/audit/", {"instance": box.name}).content.decode()
    assert page.count("<tr><td>") == AUDIT_PAGE and f"edit {AUDIT_PAGE + 4}" in page and "edit 4<" not in page
    older = re.search(r'href="\?([^"]+)" id="older"', page).group(1).replace("&amp;", "&")
    assert f"instance={box.name}" in older  # the filter stays on the next page
    rest = client.get("/audit/?" + older).content.decode()
    assert rest.count("<tr><td>") == 5 and "edit 0<" in rest and 'id="older"' not in rest and 'id="newest"' in rest
    assert client.get("/audit/", {"before": "x'1"}).status_code == 200  # not a number: the first page
    assert len(client.get("/audit/", {"format": "json", "instance": box.name}).json()) == AUDIT_PAGE + 5
