"""A rent from request to a registered box, against provider stubs that start a real sshd (fresh port,
fresh host key) on create: approval by another person, fallback past "no capacity", the naming rule, the
host key waiting for a person, and a create that may have landed never sent twice."""

import getpass
import subprocess
import sys
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from core.models import AuditEntry
from fleet.drift import keys_to_reconcile
from fleet.models import Credential, Instance, InstanceEvent
from fleet.tasks import probe_instance
from rentals.actions import do_cancel_rental, do_confirm_rental, do_decide_rental, do_request_rental
from rentals.creating import create, poll
from rentals.forms import RentalForm
from rentals.models import Rental, RentalAttempt, RentalState
from rentals.proving import prove
from rentals.reconcile import do_redrive_stale
from tests import factories
from tests.provider_stub import api_credential
from tests.provider_stubs import lambdalabs
from tests.provider_stubs.vastai import offer as vast_offer
from tests.rentals.test_offers import gpu_type
from tests.sshd import BoxMaker

# Creates and polls are called here, one step at a time: no worker may take the tasks they enqueue.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_worker")]

VAST_OFFERS = [
    vast_offer(501, "RTX_4090", 24564, 0.52),
    vast_offer(502, "RTX_4090", 24564, 0.38),
    vast_offer(503, "A100_SXM4", 81920, 1.45),
]
LAMBDA_TYPES = {
    "gpu_1x_a100": lambdalabs.instance_type("gpu_1x_a100", "A100 (40 GB PCIe)", 129, ["us-east-1"]),
    "gpu_1x_rtx4090": lambdalabs.instance_type("gpu_1x_rtx4090", "RTX 4090 (24 GB)", 45, ["us-west-1"]),
}


SSH_KEY_NAME = "rent-key"


@pytest.fixture
def boxes(tmp_path, provider_api):
    """Each create starts a real sshd on a fresh port with a fresh host key, which lets in only the keys
    the provider was given for it; Lambda's account holds the rent's key under its credential's name."""
    maker = BoxMaker(tmp_path)
    provider_api.on_create, provider_api.on_attach = maker, maker.authorize
    provider_api.offers["vastai"] = VAST_OFFERS
    provider_api.offers["lambda"] = LAMBDA_TYPES
    provider_api.account_keys["lambda"] = [{"id": "k1", "name": SSH_KEY_NAME, "public_key": maker.public_key()}]
    yield maker.started, maker.client_key
    maker.stop()


def logs_in(client_key, port: int) -> bool:
    """Whether the rent's key opens a session on the box at port (real ssh, batch mode: no prompt)."""
    options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
    argv = ["ssh", *options, "-i", str(client_key), "-p", str(port), f"{getpass.getuser()}@127.0.0.1", "true"]
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def _ask(project, user, client_key, **fields):
    ssh = Credential.objects.filter(name=SSH_KEY_NAME).first() or factories.ssh_key(
        project, str(client_key), name=SSH_KEY_NAME
    )
    key = api_credential(project)
    data = {
        "purpose": "train",
        "gpu_models": "RTX 4090",
        "gpu_count": 1,
        "gpu_memory_gb": 20,
        "disk_gb": 40,
        "max_rate": "0.60",
        "candidates": "lambda, vastai",
        "ssh_credential": ssh.pk,
        "ssh_user": getpass.getuser(),
        "image": "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime",
        "expected_minutes": 90,
        "key_lambda": key.pk,
        "key_vastai": key.pk,
        "key_runpod": key.pk,
        "acknowledge": "on",
        **fields,
    }
    form = RentalForm(data, project=project, user=user)
    assert form.is_valid(), form.errors
    return do_request_rental(form.save(), actor=user)


def test_bad_requests_are_refused_before_anything_is_created(project, bob, provider_api):
    ssh = factories.ssh_key(project, "/nonexistent")
    key = api_credential(project)
    base = {
        "purpose": "train",
        "gpu_models": "RTX 4090",
        "gpu_count": 1,
        "disk_gb": 40,
        "gpu_memory_gb": 0,
        "max_rate": "0.5",
        "candidates": "vastai",
        "ssh_credential": ssh.pk,
        "image": "img",
        "expected_minutes": 60,
        "key_vastai": key.pk,
        "acknowledge": "on",
    }
    unknown = RentalForm({**base, "gpu_models": "RTX 9999"}, project=project)
    assert not unknown.is_valid() and "not a GPU model we know" in str(unknown.errors["gpu_models"])
    no_key = RentalForm({**base, "candidates": "vastai, lambda"}, project=project)
    assert not no_key.is_valid() and "No provider API key for lambda" in str(no_key.errors["candidates"])
    other = factories.project()
    foreign = factories.credential("provider-key", "env:X", other)
    stolen = RentalForm({**base, "key_vastai": foreign.pk}, project=project)
    assert not stolen.is_valid() and "key_vastai" in stolen.errors
    unread = RentalForm({**base, "acknowledge": ""}, project=project)
    assert not unread.is_valid() and "acknowledge" in unread.errors
    assert Rental.objects.count() == 0 and provider_api.requests == []


def test_only_another_approver_approves_and_a_max_below_every_offer_creates_nothing(
    project, alice, bob, carol, boxes, provider_api
):
    _, client_key = boxes
    rental = _ask(project, bob, client_key, max_rate="0.10", candidates="vastai")
    assert rental.state == RentalState.REQUESTED and rental.expected_cost == Decimal("0.15")
    assert rental.name == f"{project.slug}-train-r{rental.pk}-{rental.created:%Y%m%d}"
    with pytest.raises(PermissionDenied, match="requester"):
        factories_grant_approver(bob, project)
        do_decide_rental(rental.pk, True, "", actor=bob)
    with pytest.raises(PermissionDenied, match="approver"):
        do_decide_rental(rental.pk, True, "", actor=carol)
    do_decide_rental(rental.pk, True, "ok", actor=alice)
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert rental.state == RentalState.FAILED
    assert "cheapest fitting was 1× RTX 4090 (24 GB) at $0.3866/h" in rental.reason  # with its 40 GB disk
    assert "Nothing was created" in rental.reason and provider_api.creates() == []
    with pytest.raises(ValidationError):
        do_cancel_rental(rental.pk, actor=bob)


def factories_grant_approver(user, project):
    from tests.personas import grant

    grant(user, project, "approver")


def test_no_capacity_moves_to_the_next_candidate_and_the_box_waits_for_its_host_key(
    project, alice, bob, boxes, provider_api, instance, draft
):
    started, client_key = boxes
    provider_api.no_capacity.add("lambda")
    run = draft(command=[sys.executable, "-c", "print('one batch')"])
    rental = _ask(project, bob, client_key, run=run.pk, proving_box=instance.pk)
    assert prove(rental.pk) == "passed"  # proven on the project's $0 box first (test_prove_before_rent)
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "created"
    rental.refresh_from_db()
    outcomes = list(rental.attempts.values_list("provider", "outcome"))
    assert outcomes == [("lambda", "sent"), ("lambda", "no_capacity"), ("vastai", "sent"), ("vastai", "created")]
    assert rental.state == RentalState.BOOTING and rental.provider == "vastai"
    (made,) = provider_api.creates()
    assert made["body"]["label"] == rental.name and made["idempotency_key"] == f"{rental.key}-vastai"
    # The cheaper fitting 4090, priced for the 40 GB disk it is created with (vast prices dph_total for
    # allocated_storage: at the default 8 GB it read $0.38/h, under the bill); stopped, its disk bills.
    assert rental.offer["offer_id"] == "502" and rental.offer["rate"] == 0.386575
    assert ("vastai", api_credential(project).pk) in keys_to_reconcile()

    assert poll(rental.pk) == "waiting"  # listed loading first
    assert poll(rental.pk) == "registered"
    rental.refresh_from_db()
    box = rental.instance
    assert (box.name, box.provider_id, box.port) == (rental.name, rental.provider_id, started[0].port)
    assert box.rate_running == Decimal("0.3866") and box.pinned_host_key is None
    assert box.rate_stopped == Decimal("0.0082")  # 40 GB at $0.15/GB/month
    # vast.ai's account keys reach only boxes made after them: the rent's key was attached to this one.
    (attach,) = provider_api.calls_for(rental.provider_id, "attach_ssh")
    assert attach["body"]["ssh_key"] == boxes_public(client_key)
    assert logs_in(client_key, box.port)
    probe_instance(box.pk, "light")
    box.refresh_from_db()
    assert box.seen_host_key is not None and box.pinned_host_key is None  # never trusted silently

    with pytest.raises(ValidationError, match="changed"):
        do_confirm_rental(rental.pk, "SHA256:not-the-key", actor=bob)
    do_confirm_rental(rental.pk, box.seen_host_key.fingerprint, actor=bob)
    rental.refresh_from_db()
    box.refresh_from_db()
    assert rental.state == RentalState.READY and box.pinned_host_key is not None
    run.refresh_from_db()  # the run it was asked for moved onto the box and started its preflight
    assert run.instance_id == box.pk and run.state == "preflight"
    assert box.events.filter(kind=InstanceEvent.Kind.CREATED, message__contains=f"rent #{rental.pk}").exists()


def test_a_create_whose_answer_was_lost_is_found_by_its_name_not_sent_again(project, alice, bob, boxes, provider_api):
    _, client_key = boxes
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    provider_api.fail_next("502", "late")  # the box is made; the answer never arrives
    assert create(rental.pk) == "created"
    rental.refresh_from_db()
    assert len(provider_api.creates()) == 1 and rental.provider_id == provider_api.creates()[0]["target"]
    assert rental.attempts.filter(outcome=RentalAttempt.Outcome.CREATED, detail__contains="found by its name").exists()


def test_a_worker_killed_after_the_create_call_leaves_a_rent_the_redrive_adopts(
    project, alice, bob, boxes, provider_api, settings
):
    """What a SIGKILL between the provider's create and our record of it leaves: a SENT attempt and a
    rent creating. The reconciler re-drives it; the task looks for the name first and creates nothing."""
    _, client_key = boxes
    settings.RENT_CREATE_SECONDS = 0
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    provider_api.hold["502"] = __import__("threading").Event()
    provider_api.hold["502"].set()
    # The state a killed worker leaves, reached by the same actions the task uses:
    from rentals.actions import do_claim_rental, do_record_attempt

    do_claim_rental(rental.pk)
    do_record_attempt(rental.pk, "vastai", RentalAttempt.Outcome.SENT, {"offer_id": "502"}, "", "")
    from fleet.renting import BoxKey, create_box
    from providers.offers import Need, Offer

    offer, key = Offer("vastai", "502", "RTX 4090", 1, 24, 0.38), BoxKey("k", "ssh-ed25519 AAAA")
    create_box(offer, api_credential(project), Need(("RTX 4090",), 1, 0, 40, 0.6), rental.name, "img", key, "i")
    assert do_redrive_stale()["redrive"] == [rental.pk]
    assert create(rental.pk) == "created"
    rental.refresh_from_db()
    assert rental.state == RentalState.BOOTING and len(provider_api.creates()) == 1
    assert Instance.objects.filter(name=rental.name).count() == 0  # registered only once it runs


def test_every_waiting_state_has_a_deadline(project, alice, bob, boxes, provider_api, settings):
    """Unanswered: expired. Creating with no progress: re-driven RENT_MAX_REDRIVES times, then failed with a
    next step. Created but never running: failed past RENT_BOOT_SECONDS, and the key is reconciled."""
    from datetime import timedelta

    from django.utils import timezone

    from rentals.reconcile import do_expire_rentals

    _, client_key = boxes
    waiting = _ask(project, bob, client_key, candidates="vastai")
    assert do_expire_rentals(now=timezone.now() + timedelta(hours=25)) == 1
    waiting.refresh_from_db()
    assert waiting.state == RentalState.EXPIRED
    with pytest.raises(ValidationError):
        do_decide_rental(waiting.pk, True, "late", actor=alice)

    settings.RENT_CREATE_SECONDS, settings.RENT_MAX_REDRIVES = 0, 2
    lost = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(lost.pk, True, "go", actor=alice)  # its task was enqueued; no worker takes it
    assert do_redrive_stale()["redrive"] == [lost.pk]
    assert do_redrive_stale()["redrive"] == [lost.pk]
    assert do_redrive_stale()["failed"] == [lost.pk]
    lost.refresh_from_db()
    assert lost.state == RentalState.FAILED and "lost 3 times" in lost.reason and "drift" in lost.reason

    settings.RENT_BOOT_SECONDS = 0
    provider_api.boot_reads_default = 10**6  # it never runs
    never = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(never.pk, True, "go", actor=alice)
    assert create(never.pk) == "created"
    assert do_redrive_stale()["poll"] == [never.pk]
    assert poll(never.pk) == "failed"
    never.refresh_from_db()
    assert never.state == RentalState.FAILED and "did not run with an SSH endpoint" in never.reason
    assert never.instance is None and ("vastai", api_credential(project).pk) in keys_to_reconcile()
    from fleet.drift import do_reconcile_providers
    from fleet.models import DriftKind, ProviderDrift

    do_reconcile_providers()  # a box created but never registered bills under the key: found as an orphan
    assert ProviderDrift.objects.filter(provider_id=never.provider_id, kind=DriftKind.ORPHAN).exists()


CENTRES = [{"id": "EU-RO-1", "name": "Romania", "availability": "MEDIUM"}]
RUNPOD_TYPES = [gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.44, "MEDIUM", dataCenters=CENTRES)]


def test_runpod_is_asked_through_its_v2_catalogue_and_created_by_rest_v2(project, alice, bob, boxes, provider_api):
    """vast.ai has nothing under the max (and says what the max would have to be); RunPod's v2 catalogue has
    stock in Secure Cloud: the pod is created there (REST v2's nested body) with the rule's name, found
    running at its ssh.direct address and port, and RunPod's balance is read from GraphQL (no v2 call)."""
    from fleet.provider_calls import account_balance

    started, client_key = boxes
    provider_api.offers["runpod"] = RUNPOD_TYPES
    provider_api.offers["vastai"] = [dict(offer, dph_total=0.9) for offer in VAST_OFFERS]  # all over the max
    rental = _ask(project, bob, client_key, candidates="vastai, runpod", max_rate="0.50")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "created", list(rental.attempts.values_list("provider", "outcome", "detail"))
    rental.refresh_from_db()
    assert "cheapest fitting 1× RTX 4090 (24 GB) at $0.9066/h" in rental.attempts.first().detail
    assert list(rental.attempts.values_list("provider", "outcome")) == [
        ("vastai", "no_offer"),
        ("runpod", "sent"),
        ("runpod", "created"),
    ]
    (made,) = provider_api.creates()
    assert made["body"]["name"] == rental.name and made["body"]["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1}
    assert made["body"]["cloud"] == "SECURE"  # the cloud the offer was priced in
    assert made["body"]["env"]["PUBLIC_KEY"].startswith("ssh-ed25519 ")  # the pod's images authorize it
    assert poll(rental.pk) in ("waiting", "registered")
    wait = poll(rental.pk)
    rental.refresh_from_db()
    assert rental.state == RentalState.REGISTERED, wait
    assert rental.instance.port == started[-1].port and rental.instance.rate_running == Decimal(
        "0.4455"
    )  # the GPU and its 40 GB container disk
    assert logs_in(client_key, rental.instance.port)
    provider_api.balances["runpod"] = 12.5
    assert account_balance("runpod", api_credential(project)) == 12.5


def test_lambda_launches_only_when_the_key_it_names_is_the_rent_s_own(project, alice, bob, boxes, provider_api):
    """Lambda's launch names an account key: one of that name holding another key would make a box we
    cannot enter, billing. It is asked first; the next candidate is tried and nothing is launched there."""
    started, client_key = boxes
    provider_api.account_keys["lambda"][0]["public_key"] = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherKeyOtherKeyOtherKey"
    )
    rental = _ask(project, bob, client_key)
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "created"
    rental.refresh_from_db()
    first = rental.attempts.first()
    assert (first.provider, first.outcome) == ("lambda", "error") and "another key than this rent's" in first.detail
    assert [c["provider"] for c in provider_api.creates()] == ["vastai"]

    provider_api.account_keys["lambda"] = []  # no key of that name at all
    again = _ask(project, bob, client_key, candidates="lambda")
    do_decide_rental(again.pk, True, "go", actor=alice)
    assert create(again.pk) == "failed"
    assert "Lambda has no SSH key named rent-key" in again.attempts.first().detail
    assert [c["provider"] for c in provider_api.creates()] == ["vastai"]

    provider_api.account_keys["lambda"] = [{"id": "k1", "name": SSH_KEY_NAME, "public_key": boxes_public(client_key)}]
    third = _ask(project, bob, client_key, candidates="lambda")
    do_decide_rental(third.pk, True, "go", actor=alice)
    assert create(third.pk) == "created"
    assert poll(third.pk) == "waiting" and poll(third.pk) == "registered"
    third.refresh_from_db()  # Lambda lists the box's IP only (port 22): its loopback sshd is reached by its port
    assert provider_api.box_keys[third.provider_id] == [boxes_public(client_key)]
    assert logs_in(client_key, started[-1].port)


def _created(project, approver, requester, client_key) -> Rental:
    """A vast.ai rent asked, approved by another person and created (booting)."""
    rental = _ask(project, requester, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=approver)
    assert create(rental.pk) == "created"
    rental.refresh_from_db()
    return rental


def boxes_public(client_key) -> str:
    """The client key's public line, type and base64 (what a provider holds of it)."""
    return " ".join(client_key.with_suffix(".pub").read_text().split()[:2])


def test_a_box_is_registered_only_once_it_holds_the_key(project, alice, bob, boxes, provider_api):
    """vast.ai refuses the attach once: the rent keeps booting (said why), and registers on the next poll."""
    rental = _created(project, alice, bob, boxes[1])
    assert poll(rental.pk) == "waiting"  # listed loading
    provider_api.fail_next(rental.provider_id, 403)
    assert poll(rental.pk) == "waiting"
    rental.refresh_from_db()
    assert rental.state == RentalState.BOOTING and rental.instance is None
    assert poll(rental.pk) == "registered"
    rental.refresh_from_db()
    assert logs_in(boxes[1], rental.instance.port)


def test_a_key_whose_public_half_cannot_be_read_fails_before_anything_is_sent(project, alice, bob, boxes, provider_api):
    _, client_key = boxes
    factories.ssh_key(project, "/nonexistent/key", name=SSH_KEY_NAME)
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "does not exist on this worker" in rental.reason and "Nothing was created" in rental.reason
    assert provider_api.creates() == [] and not rental.attempts.exists()


def test_a_rent_delivered_to_two_workers_at_once_is_created_once(project, alice, bob, boxes, provider_api):
    """A create message delivered twice (a redelivery beside a re-drive): both workers claim at once on
    PostgreSQL; one asks the candidates, the other finds it held, and the provider creates one box."""
    from tests.racing import at_once

    _, client_key = boxes
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    outcomes = at_once(lambda: create(rental.pk), lambda: create(rental.pk), lambda: create(rental.pk))
    assert sorted(outcomes) == ["created", "nothing to do", "nothing to do"], outcomes
    assert len(provider_api.creates()) == 1
    assert RentalAttempt.objects.filter(rental=rental, outcome="sent").count() == 1


def test_two_approvers_deciding_at_once_decide_once(project, alice, bob, erin, boxes, provider_api):
    from tests.personas import join
    from tests.racing import at_once

    join(project, erin)
    _, client_key = boxes
    rental = _ask(project, bob, client_key, candidates="vastai")
    outcomes = at_once(
        lambda: do_decide_rental(rental.pk, True, "a", actor=alice).state,
        lambda: do_decide_rental(rental.pk, False, "e", actor=erin).state,
    )
    assert len([o for o in outcomes if o in ("approved", "rejected")]) == 1, outcomes
    assert any("is approved" in o or "is rejected" in o for o in outcomes), outcomes
    assert AuditEntry.objects.filter(action__in=("rent.approved", "rent.rejected")).count() == 1


def test_a_key_revoked_after_approval_creates_nothing(project, alice, bob, boxes, provider_api):
    """The rent's API key is read at use: an administrator's revocation between approval and creation
    stops it (an operator never reaches a key no longer granted to the project)."""
    _, client_key = boxes
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    api_credential(project).projects.remove(project)
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert rental.state == RentalState.FAILED and provider_api.requests == []
    assert "no longer granted" in rental.attempts.get().detail


def test_a_box_whose_name_was_taken_meanwhile_fails_the_rent_with_what_to_do(project, alice, bob, boxes, provider_api):
    rental = _created(project, alice, bob, boxes[1])
    factories.box(project, name=rental.name)  # someone registered a box by that name by hand
    while (said := poll(rental.pk)) == "waiting":
        pass
    rental.refresh_from_db()
    assert said == "failed" and rental.state == RentalState.FAILED
    assert "could not be registered" in rental.reason and "release it" in rental.reason


def test_a_create_with_no_answer_and_no_box_listed_sends_nothing_more_until_it_is_looked_for_again(
    project, alice, bob, boxes, provider_api, settings
):
    """vast.ai does not answer the create and lists no box by the name yet: nothing else is sent (not even
    to the next candidate: a late create may still land). The re-drive looks again; still none: the
    candidates are asked again, and one box is made."""
    _, client_key = boxes
    rental = _ask(project, bob, client_key, candidates="vastai, lambda")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    provider_api.fail_next("502", "timeout")  # no answer, and nothing was made
    assert create(rental.pk) == "retry later"
    rental.refresh_from_db()
    assert rental.state == RentalState.CREATING and rental.attempts.last().outcome == "sent"
    assert provider_api.creates() == [] and not [r for r in provider_api.requests if r["provider"] == "lambda"]
    settings.RENT_CREATE_SECONDS = 0  # the claim's lease has passed: the re-drive may take it
    assert create(rental.pk) == "created"
    assert len(provider_api.creates()) == 1
    assert rental.attempts.filter(detail__contains="left no box named").count() == 1


def test_a_rent_in_a_region_with_a_volume_attaches_it_and_the_box_records_both(
    project, alice, bob, boxes, provider_api
):
    """Lambda took the first region with capacity, and no create attached a volume: the durable tier of a
    move could be in another region. A rent names its region and its filesystem now; the launch carries
    both, and the box records them (what a move reads, runs/reach.py)."""
    _, client_key = boxes
    provider_api.offers["lambda"] = {
        "gpu_1x_rtx4090": lambdalabs.instance_type("gpu_1x_rtx4090", "RTX 4090 (24 GB)", 45, ["us-east-1", "us-west-1"])
    }
    with pytest.raises(AssertionError, match="vastai cannot attach a volume at create here"):
        _ask(project, bob, client_key, candidates="lambda, vastai", durable_volume="ckpt-fs")
    provider_api.volumes["lambda"] = [lambdalabs.filesystem("fs-77", "ckpt-fs", "us-west-1", bytes_used=9)]
    rental = _ask(project, bob, client_key, candidates="lambda", region="us-west-1", durable_volume="ckpt-fs")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "created"
    (made,) = provider_api.creates()
    assert made["body"]["region_name"] == "us-west-1" and made["body"]["file_system_names"] == ["ckpt-fs"]
    poll(rental.pk)
    assert poll(rental.pk) == "registered"
    rental.refresh_from_db()
    assert (rental.instance.region, rental.instance.durable_volume) == ("us-west-1", "fs-77")
    assert rental.instance.mirror_root == "/lambda/nfs/ckpt-fs"  # where Lambda mounts it: the durable root
    assert not rental.instance.resources.exists()  # found, not created: the person's volume already


@pytest.mark.parametrize("provider", ["runpod", "lambda"])
def test_a_rent_creates_its_volume_before_the_box_and_attaches_it(project, alice, bob, boxes, provider_api, provider):
    """A rent that asks for a volume of a size creates it first, in its region, where none of that name
    is listed (a lost answer is found by its name, never sent twice); the box is created onto it, mounts
    it as its durable root, and the volume is registered beside the box as what it bills."""
    _, client_key = boxes
    provider_api.offers["runpod"] = RUNPOD_TYPES
    provider_api.offers["lambda"] = {
        "gpu_1x_rtx4090": lambdalabs.instance_type("gpu_1x_rtx4090", "RTX 4090 (24 GB)", 45, ["us-west-1"])
    }
    region = {"runpod": "EU-RO-1", "lambda": "us-west-1"}[provider]
    with pytest.raises(AssertionError, match="name the rent's region"):
        _ask(project, bob, client_key, candidates=provider, durable_volume="ckpt", volume_gb=50)
    rental = _ask(project, bob, client_key, candidates=provider, region=region, durable_volume="ckpt", volume_gb=50)
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "created", list(rental.attempts.values_list("provider", "outcome", "detail"))
    (made,) = provider_api.volume_creates
    rental.refresh_from_db()
    volume = rental.volume
    assert volume["how"] == "created" and volume["name"] == "ckpt"
    (box,) = provider_api.creates()
    if provider == "runpod":
        assert made["body"] == {"name": "ckpt", "size": 50, "dataCenter": "EU-RO-1"}
        assert box["body"]["mounts"] == {"network": [{"volumeId": volume["id"], "path": "/workspace"}]}
    else:
        assert made["body"] == {"name": "ckpt", "region": "us-west-1"}
        assert box["body"]["file_system_names"] == ["ckpt"]
    poll(rental.pk)
    assert poll(rental.pk) == "registered"
    rental.refresh_from_db()
    instance = rental.instance
    assert instance.durable_volume == volume["id"] and instance.image == rental.image  # compare's "image"
    assert instance.mirror_root == {"runpod": "/workspace", "lambda": "/lambda/nfs/ckpt"}[provider]
    (registered,) = instance.resources.all()
    assert (registered.provider_id, registered.name, registered.kind) == (volume["id"], "ckpt", volume["kind"])


def test_a_rent_naming_a_volume_that_is_not_there_creates_nothing(project, alice, bob, boxes, provider_api):
    _, client_key = boxes
    provider_api.volumes["runpod"] = [
        {"id": "nv9", "name": "other", "size": 10, "dataCenter": "EU-RO-1", "type": "STANDARD"}
    ]
    rental = _ask(project, bob, client_key, candidates="runpod", durable_volume="ckpt")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "runpod lists no volume ckpt under this key" in rental.reason and "No box was created" in rental.reason
    assert provider_api.creates() == [] and provider_api.volume_creates == []
    found = _ask(project, bob, client_key, candidates="runpod", durable_volume="other")  # by its name
    do_decide_rental(found.pk, True, "go", actor=alice)
    provider_api.offers["runpod"] = RUNPOD_TYPES
    assert create(found.pk) == "created"
    (box,) = provider_api.creates()
    assert box["body"]["mounts"]["network"] == [{"volumeId": "nv9", "path": "/workspace"}]
    assert provider_api.volume_creates == []


def test_a_provider_that_cannot_be_asked_is_an_outage_asked_again_not_the_requests_fault(
    project, alice, bob, boxes, provider_api, settings
):
    """Before: "no candidate had a fitting offer … change the request and ask again" over an attempt that
    said "vastai API unreachable: Connection refused", at once and for good."""
    import socket

    _, client_key = boxes
    with socket.socket() as closed:  # a port nothing listens on once closed: connection refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.RENT_CREATE_SECONDS, settings.RENT_MAX_REDRIVES = 0, 1
    settings.PROVIDER_API_BASES = {**settings.PROVIDER_API_BASES, "vastai": f"http://127.0.0.1:{port}"}
    rental = _ask(project, bob, client_key, candidates="vastai")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "retry later"
    rental.refresh_from_db()
    assert rental.state == RentalState.CREATING and rental.reason == ""
    assert do_redrive_stale()["redrive"] == [rental.pk]
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert rental.state == RentalState.FAILED and "vastai could not be asked 2 times" in rental.reason
    assert "Connection refused" in rental.reason and "change the request" not in rental.reason
    assert provider_api.creates() == []


@pytest.mark.parametrize("owned_by", ["resource", "box"])
def test_another_projects_volume_is_never_attached_to_a_rent(project, alice, bob, boxes, provider_api, owned_by):
    """Projects A and B share the team's key; before, A's rent naming B's volume was created onto it and
    mounted it as A's durable root. One provider id, one owner: refused, nothing created."""
    _, client_key = boxes
    provider_api.offers["lambda"] = LAMBDA_TYPES
    provider_api.volumes["lambda"] = [lambdalabs.filesystem("fs-b", "b-ckpt", "us-west-1")]
    other = factories.project(name="Project B")
    theirs = factories.box(other, "lambda", state="running")
    if owned_by == "resource":
        # Registered under another label: only the provider's listing ties the name b-ckpt to fs-b.
        factories.resource(theirs, "filesystem", name="team-b-store", provider_id="fs-b")
    else:
        theirs.durable_volume = "fs-b"
        theirs.save()
    rental = _ask(project, bob, client_key, candidates="lambda", region="us-west-1", durable_volume="b-ckpt")
    do_decide_rental(rental.pk, True, "go", actor=alice)
    assert create(rental.pk) == "failed"
    rental.refresh_from_db()
    assert "b-ckpt (fs-b) is Project B's, not this project's" in rental.reason
    assert "Nothing was created" in rental.reason
    assert provider_api.creates() == [] and rental.volume == {}


def test_the_rent_form_says_whose_a_volume_is_and_refuses_another_projects(project, bob, boxes):
    """The form, before anything is asked of a provider: this project's known volumes are listed beside the
    field, and a volume another project holds here, named by its id or its name, is a form error naming
    whose it is (the worker checks again against what the provider lists)."""
    from rentals.forms import RentalForm

    ours = factories.box(project, "lambda", state="running", name=f"{project.slug}-ours-20261207")
    ours.durable_volume = "fs-a"
    ours.save()
    other = factories.project(name="Project B")
    factories.resource(factories.box(other, "lambda", state="running"), "filesystem", name="b-ckpt", provider_id="fs-b")
    help_text = RentalForm(project=project, user=bob).fields["durable_volume"].help_text
    assert (
        f"This project's: fs-a ({ours.name}, lambda)." in help_text and "another project holds is refused" in help_text
    )
    _, client_key = boxes
    for named in ("fs-b", "b-ckpt"):
        with pytest.raises(AssertionError, match=f"lambda volume {named} is Project B's, not this project's"):
            _ask(project, bob, client_key, candidates="lambda", region="us-west-1", durable_volume=named)
    assert not project.rentals.exists()  # nothing of it was saved
    assert _ask(project, bob, client_key, candidates="lambda", region="us-west-1", durable_volume="fs-a").pk
