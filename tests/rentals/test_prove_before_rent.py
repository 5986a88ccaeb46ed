"""The pre-rent gate: a rent asked for a run proves that run first where no GPU bills (here a loopback
sshd box of the project at $0/h, the same code path as the control host's local node): its source
shipped, its input checks and its CPU smoke. A run whose smoke fails is never sent to a provider (the
stub counts zero creates); one that passes waits for its approver, and the rent's page shows what was
proven, where, and what it cost."""

import sys

import pytest
from django.core.exceptions import ValidationError

from core.models import AuditEntry
from rentals.actions import do_decide_rental
from rentals.creating import create
from rentals.forms import RentalForm
from rentals.models import RentalState
from rentals.proving import prove
from rentals.reconcile import do_redrive_stale
from tests.rentals.test_rent_flow import _ask, boxes  # noqa: F401 (the stub's boxes, the rent's form)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]


def test_a_run_whose_smoke_fails_is_never_sent_to_a_provider(project, alice, bob, boxes, provider_api, instance, draft):  # noqa: F811
    _, client_key = boxes
    broken = [sys.executable, "-c", "import sys; print('KeyError: lr_schedule'); sys.exit(3)"]
    run = draft(command=broken)
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    assert rental.state == RentalState.PROVING  # nobody is asked to approve a run not yet proven
    with pytest.raises(ValidationError, match="proving"):
        do_decide_rental(rental.pk, True, "go", actor=alice)
    assert prove(rental.pk) == "failed"
    rental.refresh_from_db()
    assert rental.state == RentalState.FAILED
    assert rental.reason.startswith(f"the run failed its proof on {instance.name} before anything was rented")
    assert "its CPU smoke failed (exit code 3)" in rental.reason and "Nothing was created" in rental.reason
    assert rental.proof["smoke_exit_code"] == 3 and "KeyError: lr_schedule" in rental.proof["smoke_output"]
    assert create(rental.pk) == "nothing to do"
    assert provider_api.creates() == [] and not rental.attempts.exists()  # zero creates, zero asks


def test_a_missing_config_fails_the_proof_before_the_smoke(project, bob, boxes, provider_api, instance, draft):  # noqa: F811
    _, client_key = boxes
    run = draft(config_path="configs/absent.yaml")
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    assert prove(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "missing config:" in rental.reason and "absent.yaml" in rental.reason
    assert "smoke_exit_code" not in rental.proof and provider_api.creates() == []


def test_a_proven_run_is_rented_and_the_page_shows_the_proof(
    project,
    alice,
    bob,
    boxes,  # noqa: F811
    provider_api,
    instance,
    draft,
    client,
    node,
):
    _, client_key = boxes
    run = draft(gpus=[0], data_paths=["~/data/imagenet"])
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk, candidates="vastai")
    assert prove(rental.pk) == "passed"
    assert prove(rental.pk) == "nothing to do"  # a redelivered proof does nothing twice
    rental.refresh_from_db()
    assert rental.state == RentalState.REQUESTED and rental.proof["passed"]
    assert rental.proof["box"] == instance.name and rental.proof["smoke_exit_code"] == 0
    assert rental.proof["left_to_the_box"] == ["data path ~/data/imagenet", "GPU 0 (CUDA, count, model)"]
    root = node.root  # the proving box is this machine: what the proof left there is set aside, named
    assert not (root / "active" / f"{run.run_id}-proof").exists()
    (kept,) = (root / "quarantine").glob(f"{run.run_id}-proof--closed-*")
    assert "the proof of" in (kept / "reason.txt").read_text()
    client.force_login(alice)
    page = client.get(rental.get_absolute_url()).content.decode()
    assert "Proven before the rent" in page and 'id="proof-verdict">Passed on' in page
    assert f"on <strong>{instance.name}</strong>" in page and 'id="proof-cost">$0.0000<' in page
    do_decide_rental(rental.pk, True, "proven: go", actor=alice)
    assert create(rental.pk) == "created"
    assert len(provider_api.creates()) == 1


def test_a_rent_for_a_run_names_where_it_is_proven(project, bob, boxes, provider_api, draft):  # noqa: F811
    """No local node and no box named: refused on the form, before anything is asked."""
    _, client_key = boxes
    run = draft()
    with pytest.raises(AssertionError, match="proving_box"):
        _ask(project, bob, client_key, run=run.pk)
    form_field = RentalForm(project=project).fields["proving_box"]
    assert form_field.label == "Prove the run first on"


def test_a_proof_whose_worker_was_lost_is_taken_again_then_failed(
    project,
    bob,
    boxes,  # noqa: F811
    provider_api,
    instance,
    draft,
    settings,
):
    from datetime import timedelta

    from django.utils import timezone

    _, client_key = boxes
    run = draft()
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    settings.RENT_PROVE_SECONDS = 60
    now = timezone.now()
    assert do_redrive_stale(now)["prove"] == []
    assert do_redrive_stale(now + timedelta(seconds=61))["prove"] == [rental.pk]
    do_redrive_stale(now + timedelta(seconds=121))
    rental.refresh_from_db()
    assert rental.state == RentalState.FAILED and "gave no answer within 120 s" in rental.reason
    assert provider_api.creates() == []


def test_the_local_node_proves_an_admins_rent_by_default_and_never_an_operators(
    project,
    bob,
    admin_user,
    boxes,  # noqa: F811
    provider_api,
    draft,
    settings,
):
    """In a one-person stack the control host's local node is where a run is proven, as the admin's; an
    operator never runs a command there (the form does not offer it, and the action refuses it). A
    deployment that runs nothing on the control host says so in the rent's reason, and creates nothing."""
    from django.core.exceptions import PermissionDenied

    from rentals.actions import do_request_rental
    from rentals.models import Rental
    from tests import factories

    _, client_key = boxes
    desk = factories.box(project, "local", name=f"{project.slug}-desk-20261205", state="running")
    # A team deployment offers the control host only where it can run there (an unprivileged node user):
    # without one, the form says why it is absent, and a proof there would only have failed.
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, ""
    absent = RentalForm(project=project, user=admin_user).fields["proving_box"]
    assert desk not in absent.queryset and "The control host is not offered: " in absent.help_text
    assert "REMOTEGPU_LOCAL_NODE_USER" in absent.help_text
    settings.LOCAL_NODE_USER = "nobody"
    assert RentalForm(project=project, user=admin_user).fields["proving_box"].initial == desk.pk
    operators = RentalForm(project=project, user=bob).fields["proving_box"]
    assert operators.initial is None and desk not in operators.queryset
    with pytest.raises(AssertionError, match="proving_box"):
        _ask(project, bob, client_key, run=draft().pk)  # no box named, and the local node is not bob's
    with pytest.raises(AssertionError, match="last written by bob, not an administrator"):
        _ask(project, admin_user, client_key, run=draft().pk)  # an operator's run, proven on the control host
    rental = _ask(project, admin_user, client_key, run=draft(actor=admin_user).pk)
    with pytest.raises(PermissionDenied, match="only an administrator"):  # the rule behind both doors
        do_request_rental(Rental(project=project, proving_box=desk, purpose="x"), actor=bob)
    assert not project.rentals.exclude(pk=rental.pk).exists()  # nothing of it was saved
    settings.LOCAL_NODE = False
    assert rental.proving_box_id == desk.pk
    assert prove(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "does not run commands on the control host" in rental.reason and provider_api.creates() == []


def test_an_operators_edit_before_the_proof_never_runs_on_the_control_host(
    project,
    bob,
    admin_user,
    boxes,  # noqa: F811
    provider_api,
    draft,
    settings,
    tmp_path,
):
    """The door: an administrator's rent of her own draft, proven on the local node; before the proof runs,
    an operator edits the draft's command (the page, or PATCH /api/runs/<id>/). Before: the proof ran the
    edited command on the control host as the node user. Now the proof judges who last wrote the run."""
    from runs.actions.lifecycle import do_edit_run
    from tests import factories

    _, client_key = boxes
    settings.LOCAL_NODE, settings.LOCAL_NODE_USER = True, "nobody"
    factories.box(project, "local", name=f"{project.slug}-desk-20261207", state="running")
    run = draft(actor=admin_user)
    rental = _ask(project, admin_user, client_key, run=run.pk)
    assert rental.proving_box.profile.is_local and rental.state == RentalState.PROVING
    marker = tmp_path / "ran-on-the-control-host"
    do_edit_run(run.pk, {"command": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]}, actor=bob)
    assert prove(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "may not be proven on the control host" in rental.reason and "last written by bob" in rental.reason
    assert not marker.exists() and provider_api.creates() == []


def test_a_proof_delivered_to_two_workers_at_once_runs_once(project, bob, boxes, provider_api, instance, draft):  # noqa: F811
    """acks_late redelivers a proof whose worker seemed lost: two workers take it at once on PostgreSQL's
    row lock, one proves, the other does nothing, and the rent moves once."""
    from django.db import connection

    from tests.racing import at_once

    if connection.vendor != "postgresql":
        pytest.skip("row locks are what is raced")
    _, client_key = boxes
    rental = _ask(project, bob, client_key, run=draft(command=[sys.executable, "-c", "print(1)"]).pk,
                  proving_box=instance.pk)  # fmt: skip
    outcomes = at_once(lambda: prove(rental.pk), lambda: prove(rental.pk))
    assert sorted(outcomes) == ["nothing to do", "passed"], outcomes
    rental.refresh_from_db()
    assert rental.state == RentalState.REQUESTED
    assert AuditEntry.objects.filter(message__contains="passed its checks and CPU smoke").count() == 1


def test_a_smoke_that_reads_run_secrets_is_left_to_the_rented_box(project, bob, boxes, provider_api, instance, draft):  # noqa: F811
    """Run secrets go only to the run's own box: a proof checks such a run's inputs and interpreter, and
    says its smoke is the rented box's, rather than send the secrets to a proving box."""
    _, client_key = boxes
    leaky = [sys.executable, "-c", "import sys; sys.exit(9)"]  # would fail, were it run here
    run = draft(command=leaky, secrets_in_smoke=True)
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    assert prove(rental.pk) == "passed"
    rental.refresh_from_db()
    assert "smoke_exit_code" not in rental.proof and "reads run secrets" in rental.proof["smoke_left"]
    assert rental.state == RentalState.REQUESTED


def test_a_run_edited_after_its_proof_is_proven_again_before_anyone_approves_it(
    project,
    alice,
    bob,
    boxes,  # noqa: F811
    provider_api,
    instance,
    draft,
):
    """The proof proves the draft as it was: an edit after it (another command) would be rented unproven.
    The approval finds the run changed, approves nothing, and the rent is proven again."""
    from runs.actions.lifecycle import do_edit_run

    _, client_key = boxes
    run = draft(command=[sys.executable, "-c", "print('one batch')"])
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk, candidates="vastai")
    assert prove(rental.pk) == "passed"
    do_edit_run(run.pk, {"command": [sys.executable, "-c", "raise SystemExit(4)"]}, actor=bob)
    with pytest.raises(ValidationError, match="changed since its proof: it is being proven again"):
        do_decide_rental(rental.pk, True, "go", actor=alice)
    rental.refresh_from_db()
    assert rental.state == RentalState.PROVING and rental.approver is None
    assert prove(rental.pk) == "failed"  # the edited run fails its smoke: nothing is created
    rental.refresh_from_db()
    assert "exit code 4" in rental.reason and provider_api.creates() == []


def test_a_smoke_that_reads_its_dataset_is_proven_with_that_data(project, bob, boxes, provider_api, instance, draft):  # noqa: F811
    """Before: the stand-in dropped the run's datasets, $REMOTEGPU_DATA_DIR was unset, and the proof of every
    run whose smoke reads its data failed ("its CPU smoke failed (exit code 1)"), the product's own datafit
    among them. Now the registered dataset is staged to the proving box (hashed as it lands) and read there."""
    import uuid
    from pathlib import Path

    from django.conf import settings as django_settings

    from datasets.actions import do_register_dataset
    from datasets.models import DatasetSource

    _, client_key = boxes
    files = Path(django_settings.VAR_DIR) / "sources" / f"points-{uuid.uuid4().hex[:6]}"
    files.mkdir(parents=True)
    (files / "points.csv").write_text("x,y\n1,2\n3,4\n")
    name = f"pts{uuid.uuid4().hex[:6]}"
    do_register_dataset(project, name, DatasetSource.CONTROL, str(files), actor=bob)
    reads = "import os; print(open(os.path.join(os.environ['REMOTEGPU_DATA_DIR'], 'points.csv')).read().count(','))"
    run = draft(command=[sys.executable, "-c", reads], datasets=[name])
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    assert prove(rental.pk) == "passed", rental.__class__.objects.get(pk=rental.pk).reason
    rental.refresh_from_db()
    assert rental.proof["smoke_exit_code"] == 0 and "3" in rental.proof["smoke_output"]
    assert rental.proof["left_to_the_box"] == []  # the dataset was proven here, not left to the rented box
