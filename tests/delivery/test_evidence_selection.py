"""Evidence deletion over a selection (issue 49): one form on the box's page, the exports a person ticks,
one request each under one batch, each checked on its own (the export whose last copy it is is refused,
the others filed); the approval queue shows the batch as one card and an approver decides it at once,
each request approved on its own check and audited on its own; the requester cannot."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core.models import AuditEntry
from delivery.models import TeardownRequest, TeardownStatus
from runs.models import RunState
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _in_process_only(no_worker):
    """The filed requests' proofs and the approvals' executions are enqueued; nothing runs them here."""


def test_a_selection_files_one_request_per_export_and_the_batch_is_decided_at_once(client, alice, bob):
    project = factories.project(bob)
    join(project, alice)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    kept = factories.runs(box, 2, state=RunState.EXPORTED, launched_at=timezone.now())
    for run in kept:
        factories.verified_record(run, uri="/c/x")
    (last_copy,) = factories.runs(box, 1, state=RunState.EXPORTED, launched_at=timezone.now())
    client.force_login(bob)
    page = client.get(box.get_absolute_url()).content.decode()
    assert page.count('id="evidence-selection"') == 1 and page.count('type="checkbox" name="run"') == 3

    chosen = {"run": [run.run_id for run in [*kept, last_copy]], "location": "node", "reason": "free the disk"}
    response = client.post(reverse("teardown-select-evidence", args=[box.pk]), chosen, follow=True)
    said = " ".join(str(message) for message in response.context["messages"])
    assert "2 deletion requests filed" in said
    assert f"1 refused — {last_copy.run_id}: " in said
    filed = TeardownRequest.objects.filter(instance=box).order_by("pk")
    assert {request.run_id for request in filed} == {run.pk for run in kept}
    assert len({request.batch for request in filed}) == 1 and filed[0].batch is not None
    assert all(request.status == TeardownStatus.CHECKING for request in filed)
    # The box's proofs came back clean (what prove_teardown does): both wait for a second person.
    filed.update(status=TeardownStatus.PENDING, expires_at=timezone.now() + timedelta(hours=1))
    batch = filed[0].batch
    detail = client.get(filed[0].get_absolute_url()).content.decode()
    assert f"#{filed[1].pk}</a> export on the box of {filed[1].run.run_id}" in detail  # its sibling, linked

    queue = client.get(reverse("approval-queue")).content.decode()
    card = queue[queue.index(f'id="batch-{batch}"') :]
    card = card[: card.index("</section>")]
    assert "2 exports of" in card and "2 of\n    2 approvable now" in card
    assert "You asked for these" in card and "batch-decision" not in card
    assert client.post(reverse("teardown-decide-batch", args=[batch]), {"decision": "approve"}).status_code == 403
    assert set(filed.values_list("status", flat=True)) == {TeardownStatus.PENDING}  # the requester decides nothing

    client.force_login(alice)
    queue = client.get(reverse("approval-queue")).content.decode()
    assert re.search(r'<form method="post" action="/teardown/batch/[0-9a-f-]+/decide/" class="batch-decision">', queue)
    client.post(reverse("teardown-decide-batch", args=[batch]), {"decision": "approve", "comment": "ok"})
    assert set(filed.values_list("status", flat=True)) == {TeardownStatus.APPROVED}
    assert set(filed.values_list("approver", flat=True)) == {alice.pk}
    approved = AuditEntry.objects.filter(message__contains="approved", actor=alice)
    assert approved.count() == 2  # each request audited on its own
    again = client.post(reverse("teardown-decide-batch", args=[batch]), {"decision": "approve"}, follow=True)
    assert again.status_code == 200 and "decided meanwhile" in again.content.decode()  # a second tab: the queue
    assert approved.count() == 2


def test_a_selection_of_nothing_or_of_another_boxs_export_changes_nothing(client, bob):
    project = factories.project(bob)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    other = factories.box(project, host="203.0.113.10", user="root", state="running")
    (foreign,) = factories.runs(other, 1, state=RunState.EXPORTED)
    client.force_login(bob)
    url = reverse("teardown-select-evidence", args=[box.pk])
    for data in ({"location": "node", "reason": "x"}, {"run": [foreign.run_id], "location": "node", "reason": "x"}):
        response = client.post(url, data, follow=True)
        assert response.status_code == 200 and list(response.context["messages"])
    assert not TeardownRequest.objects.exists()
    nobody = reverse("teardown-decide-batch", args=["00000000-0000-0000-0000-000000000000"])
    answer = client.post(nobody, {"decision": "approve"}, follow=True)  # before: a bare text page (400)
    assert answer.status_code == 200 and "decided meanwhile" in answer.content.decode()


def test_every_export_of_a_box_is_selected_at_once_above_the_list(client, bob):
    """Before: at 1,000 exports the one "Request deletion" button stood 90,000 px down, with no way to tick
    them all. The controls come first, and "every export of this box" files one request each."""
    project = factories.project(bob)
    box = factories.box(project, host="203.0.113.9", user="root", state="running")
    kept = factories.runs(box, 3, state=RunState.EXPORTED, launched_at=timezone.now())
    for run in kept:
        factories.verified_record(run, uri="/c/x")
    client.force_login(bob)
    page = client.get(box.get_absolute_url(), {"exports": "all"}).content.decode()
    assert page.index('id="button-delete_evidence"') < page.index('name="run" value=')  # above the list
    chosen = {"every": "1", "location": "node", "reason": "free the disk"}
    response = client.post(reverse("teardown-select-evidence", args=[box.pk]), chosen, follow=True)
    assert "3 deletion requests filed" in " ".join(str(message) for message in response.context["messages"])
    assert {request.run_id for request in TeardownRequest.objects.filter(instance=box)} == {run.pk for run in kept}
    nothing = client.post(reverse("teardown-select-evidence", args=[box.pk]), {"location": "node", "reason": "x"})
    assert nothing.status_code == 302 and TeardownRequest.objects.count() == 3
