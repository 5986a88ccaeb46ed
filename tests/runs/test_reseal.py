"""A paperwork rule failed closed: a finished training without train.csv was quarantined as a contract failure,
never retried, with no way to re-seal. Missing paperwork warns now (wrapper/export.py: PAPERWORK), and an
attempt an older wrapper quarantined for paperwork alone is sealed after all on a person's word: the box
checks the staged export it kept by today's contract (the loopback box, its real files), audited."""

import json

import pytest
import torch
from django.core.exceptions import ValidationError

from core.models import AuditAction, AuditEntry
from runs import tasks
from runs.actions.reseal import do_reseal_run
from runs.models import RunState
from runs.signals import paperwork_only

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]

PAPERWORK = "export contract not met (1 problem): required file train.csv is missing"


def quarantined_without_train_csv(make_run, node, reason=PAPERWORK, forbidden=False):
    """A run whose attempt 1 an older wrapper quarantined, its staged export kept as quarantine() keeps it."""
    run = make_run(state=RunState.QUARANTINED, attempt=1, close_reason=reason, failure_class="contract")
    staged = node.quarantine(run, 1) / "export-partial"
    staged.mkdir(parents=True)
    (staged / "run.json").write_text(json.dumps({"run_id": run.run_id, "seed": 1}))
    (staged / "config.yaml").write_text("lr: 0.01\n")
    torch.save({"model": {"w": torch.zeros(2)}}, staged / "best.pth")
    if forbidden:
        torch.save({"epoch": 3}, staged / "latest.pth")  # what can make a number wrong still refuses
    (node.quarantine(run, 1) / "reason.txt").write_text(reason + "\n")
    node.active(run).mkdir(parents=True, exist_ok=True)
    return run


def test_which_reasons_are_paperwork_alone():
    assert paperwork_only(PAPERWORK)
    two = "export contract not met (2 problems): required file train.csv is missing; required file best.pth is missing"
    assert not paperwork_only(two) and not paperwork_only("command exited with code 1") and not paperwork_only("")


def test_an_attempt_quarantined_for_paperwork_alone_is_sealed_after_all(client, bob, make_run, node):
    run = quarantined_without_train_csv(make_run, node)
    client.force_login(bob)
    assert 'id="reseal"' in client.get(run.get_absolute_url()).content.decode()
    do_reseal_run(run.pk, actor=bob)
    assert tasks.reseal_run(run.pk, 1, bob.pk) == "sealed"
    run.refresh_from_db()
    assert run.state == RunState.EXPORTED and run.close_reason == ""
    assert sorted(path.name for path in node.export(run).iterdir()) == ["best.pth", "config.yaml", "run.json"]
    roster = json.loads((node.active(run) / "sealed-roster.json").read_text())
    assert {entry["path"] for entry in roster} == {"best.pth", "config.yaml", "run.json"}
    assert "train.csv is missing: sealed without it" in run.events.order_by("-id").first().message
    audited = AuditEntry.objects.get(action=AuditAction.RUN_RESEALED, run=run)
    assert audited.actor == bob
    with pytest.raises(ValidationError):
        do_reseal_run(run.pk, actor=bob)  # exported: nothing to re-seal


def test_a_reseal_refuses_what_can_make_a_number_wrong(bob, make_run, node):
    other = quarantined_without_train_csv(make_run, node, reason="command exited with code 1")
    with pytest.raises(ValidationError, match="missing paperwork alone"):
        do_reseal_run(other.pk, actor=bob)
    run = quarantined_without_train_csv(make_run, node, forbidden=True)
    do_reseal_run(run.pk, actor=bob)
    assert tasks.reseal_run(run.pk, 1, bob.pk) == "refused"
    run.refresh_from_db()
    assert run.state == RunState.QUARANTINED and not node.export(run).exists()
    assert "latest.pth is forbidden inside an export" in run.events.order_by("-id").first().message
