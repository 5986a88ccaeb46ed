"""DELIVER state changes: one function per verb, each in a transaction with an audit entry.

Every move goes through `_move`, which allows only TEARDOWN_TRANSITIONS. Requesting, approving and
executing lock the instance row first: the evidence of every run on a box lives on that box or
in custody, so consequences touching the same evidence are decided one at a time, each counting
the others in flight as done (delivery.evidence). Execution is claimed exactly once, its idempotency
key travels to the provider, and a second consequence on a box waits while one executes.
"""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from core.states import IllegalTransition
from custody.copies import copies_of, latest_verified
from custody.models import EvidenceLocation
from delivery import checks
from delivery.audit import audit
from delivery.evidence import Consequence, touched, wiped_by
from delivery.levels import consequence_of
from delivery.models import (
    OPEN_TEARDOWN,
    TEARDOWN_TRANSITIONS,
    ReleaseHold,
    TeardownKind,
    TeardownRequest,
    TeardownStatus,
)
from fleet.models import Instance, InstanceState
from fleet.provider_calls import by_api
from projects.models import Project
from projects.roles import require
from runs.models import RunState


class TeardownRefused(ValidationError):
    """A request, approval or execution that the rules forbid; the message says why."""


class RefusedMove(TeardownRefused, IllegalTransition):
    """A move that TEARDOWN_TRANSITIONS does not allow: refused like any teardown rule."""


class EvidenceBusy(Exception):
    """Another consequence on the same box is executing: this one waits its turn."""


class BoxUnconfirmed(EvidenceBusy):
    """The execution's proofs could not measure the box (it did not answer in time): nothing is known to
    have changed, so the request waits and is tried again, never failed as "custody changed"."""


def _move(request, to: str) -> None:
    if not TEARDOWN_TRANSITIONS.allows(request.status, to):
        current = TeardownStatus(request.status).label
        raise RefusedMove(f"Request #{request.pk} cannot go from {current} to {TeardownStatus(to).label}.")
    request.status = to


def _locked(request_pk) -> TeardownRequest:
    """The instance row first, then the request: one order in every teardown transaction. A
    transaction that locked only the request and then wrote an audit row (a foreign key to the
    instance takes a share lock on it) deadlocked against one holding the instance lock. The lock
    is FOR NO KEY UPDATE: it serialises consequences on the box without blocking the rows that
    merely refer to it (audit entries, GPU locks, probes)."""
    instance_id = TeardownRequest.objects.values_list("instance_id", flat=True).get(pk=request_pk)
    Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
    return TeardownRequest.objects.select_for_update(of=("self",)).select_related("instance", "run").get(pk=request_pk)


# Audit actions the project is told of: each in the transaction that audits it.
def _enqueue_execution(request_id: int) -> None:

    after_commit("delivery.tasks.execute_teardown", request_id)


def do_request_teardown(instance_pk, kind, reason, run=None, location="", retire_hold=False, resource=None, *, actor):
    """Create a request after its custody check passes; an L2 that needs no second person is approved.

    Two phases: the deep proofs (the box's idle scan over SSH, re-hashing copies where they live)
    are gathered first, outside any transaction, so a slow box never holds its row lock; then, under
    the lock, everything is checked again from the database and the request is filed only if both
    the proofs and that fresh check pass."""
    if not reason.strip():
        raise TeardownRefused("Say why: the reason is part of the audit trail.")
    instance = Instance.objects.select_related("project").get(pk=instance_pk)
    request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
    proofs = checks.checks_for(request)  # deep: may take as long as the box does; nothing is locked
    refusal = checks.refusal(proofs)
    if not refusal:
        with transaction.atomic(durable=True):
            instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
            request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
            fresh = checks.checks_for(request, deep=False)  # what changed while the proofs were gathered
            refusal = checks.refusal(fresh)
            if not refusal:
                request.check_at_request = proofs
                _save_request(request)
    if refusal:
        # Recorded in its own transaction: a refusal is audited, and nothing else is written.
        audit(
            "refused", f"{request.get_kind_display()} refused: {refusal}", actor, instance=request.instance, kind=kind
        )
        raise TeardownRefused(f"Refused: {refusal}")
    return request


def do_file_teardown(
    instance_pk, kind, reason, run=None, location="", retire_hold=False, resource=None, batch=None, *, actor
):
    """What a person's button or API call does: file the request and leave its deep proofs to a task.

    The rules that need no box (who may ask, duplicates, holds, verified custody, what the database
    knows) are checked here, under the box's lock, and refuse at once. What the box must prove (that
    nothing works under the root, that the copies still hash) takes as long as the box does, so a
    task gathers it outside any transaction (`prove_teardown`) and `do_settle_teardown_proofs` decides;
    until then the request is CHECKING, with a deadline the reconciler holds it to."""
    if not reason.strip():
        raise TeardownRefused("Say why: the reason is part of the audit trail.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
        request = _new_request(instance, kind, reason, run, location, retire_hold, resource, actor)
        request.batch = batch if kind == TeardownKind.DELETE_EVIDENCE else None
        fresh = checks.checks_for(request, deep=False)
        refusal = checks.refusal(fresh)
        if not refusal:
            request.status = TeardownStatus.CHECKING
            # Until a task starts on its proofs: a lost enqueue is re-driven within a minute, not an hour.
            request.expires_at = timezone.now() + timedelta(seconds=settings.TEARDOWN_PROOF_START_SECONDS)
            request.check_at_request = fresh  # the database's part, until the box's proofs arrive
            request.save()
            message = f"{request.get_kind_display()} of {request.target} filed ({request.level}): checking the box"
            audit("filed", message, actor, request, reason=request.reason)
            _enqueue_proofs(request.pk)
    if refusal:
        audit("refused", f"{request.get_kind_display()} refused: {refusal}", actor, instance=instance, kind=kind)
        raise TeardownRefused(f"Refused: {refusal}")
    return request


def proof_budget(instance_id) -> float:
    """How long a started proof may take on this box: its last proofs' time with a margin (the mirror's
    worst case only on a box never proved), so a lost proof task is re-driven in minutes."""
    taken = TeardownRequest.objects.filter(instance_id=instance_id, proof_seconds__isnull=False)
    recent = list(taken.order_by("-id").values_list("proof_seconds", flat=True)[:5])
    if not recent:
        return float(settings.TEARDOWN_PROOF_SECONDS)
    budget = max(recent) * settings.TEARDOWN_PROOF_MARGIN
    return min(max(budget, settings.TEARDOWN_PROOF_MIN_SECONDS), settings.TEARDOWN_PROOF_SECONDS)


def do_start_proofs(request_pk) -> bool:
    """A proof task begins: its deadline becomes what a proof on this box takes. False when the request
    no longer waits on proofs (settled by another delivery, cancelled)."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.CHECKING:
            return False
        now = timezone.now()
        request.proof_started_at = now
        request.expires_at = now + timedelta(seconds=proof_budget(request.instance_id))
        request.save(update_fields=["proof_started_at", "expires_at"])
    return True


def do_settle_teardown_proofs(request_pk, proofs: dict, seconds: float | None = None) -> TeardownRequest:
    """The task's proofs, judged under the lock beside a fresh look at the database: the request goes on
    to its approver (or straight to execution at L2), or is refused saying what failed. A request no
    longer checking (cancelled, settled by a redelivered task) is left as it is."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.CHECKING:
            return request
        if seconds is not None:
            request.proof_seconds = seconds
            request.save(update_fields=["proof_seconds"])
        fresh = checks.checks_for(request, deep=False)
        refusal = "; ".join(why for why in (checks.refusal(proofs), checks.refusal(fresh)) if why)
        if refusal:
            _refuse(request, refusal)
        else:
            request.check_at_request = proofs
            _save_request(request)
    return request


def _refuse(request, why: str) -> None:
    _move(request, TeardownStatus.REFUSED)
    request.failure = why
    request.save(update_fields=["status", "failure"])
    audit("refused", f"{request.get_kind_display()} refused: {why}", None, request)


def do_redrive_checking(now=None) -> list[int]:
    """Requests still checking past their deadline: their proof task was lost (a worker killed, an
    enqueue that failed) or the box did not answer in time. Each is proved again once, then refused
    with the reason, so no request waits on its proofs forever."""
    now = now or timezone.now()
    redriven = []
    for pk in TeardownRequest.objects.filter(status=TeardownStatus.CHECKING, expires_at__lte=now).values_list(
        "pk", flat=True
    ):
        with transaction.atomic(durable=True):
            request = _locked(pk)
            if request.status != TeardownStatus.CHECKING or request.expires_at > now:
                continue
            lost = "its proof task never started" if request.proof_started_at is None else "its proofs were not in"
            if request.redrives >= 1:
                _refuse(request, f"the box's proofs were not gathered twice ({lost}): ask again")
                continue
            request.redrives += 1
            request.proof_started_at = None
            request.expires_at = now + timedelta(seconds=settings.TEARDOWN_PROOF_START_SECONDS)
            request.save(update_fields=["redrives", "expires_at", "proof_started_at"])
            audit("redriven", f"Request #{request.pk}: {lost}: gathered again", None, request)
            _enqueue_proofs(request.pk)
            redriven.append(pk)
    return redriven


def _enqueue_proofs(request_id: int) -> None:

    after_commit("delivery.tasks.prove_teardown", request_id)


def _new_request(instance, kind, reason, run, location, retire_hold, resource, actor) -> TeardownRequest:
    """The unsaved request, if the rules allow asking for it at all (refused with the reason if not)."""
    require(actor, "projects.operate", instance.project)
    if instance.state == InstanceState.RELEASED and kind != TeardownKind.DELETE_RESOURCE:
        raise TeardownRefused("This box is already released.")  # its volumes may still bill
    if (kind == TeardownKind.DELETE_RESOURCE) != (resource is not None) or (
        resource is not None and resource.instance_id != instance.pk
    ):
        raise TeardownRefused("A resource deletion names one resource of this box; no other consequence does.")
    duplicate = TeardownRequest.objects.filter(
        instance=instance, kind=kind, run=run, location=location, resource=resource, status__in=OPEN_TEARDOWN
    ).first()
    if duplicate:
        raise TeardownRefused(f"Request #{duplicate.pk} for this is already {duplicate.get_status_display()}.")
    request = TeardownRequest(
        instance=instance,
        kind=kind,
        run=run,
        location=location,
        resource=resource,
        requester=actor,
        reason=reason.strip(),
    )
    request.retire_hold = retire_hold and kind == TeardownKind.RELEASE
    consequence = consequence_of(kind, instance, resource)
    if consequence.not_offered:
        raise TeardownRefused(consequence.not_offered)
    request.level, request.needs_second_person = consequence.level, consequence.needs_second_person
    return request


def _save_request(request) -> None:
    """Under the box's lock: the row, its audit entry, then notify or execute. A filed request comes here
    from CHECKING once its proofs are in; one asked with its proofs in hand, unsaved."""
    request.expires_at = timezone.now() + timedelta(hours=settings.TEARDOWN_APPROVAL_HOURS)
    if request.status == TeardownStatus.CHECKING:
        _move(request, TeardownStatus.PENDING)
    if not request.needs_second_person:
        _move(request, TeardownStatus.APPROVED)
        request.decided_at = timezone.now()
        request.decision_comment = f"{request.level}: no second person required"
    request.save()
    message = f"{request.get_kind_display()} of {request.target} requested ({request.level})"
    audit("requested", message, request.requester, request, reason=request.reason)
    if request.status == TeardownStatus.APPROVED:
        _enqueue_execution(request.pk)


def _expire_if_due(request) -> bool:
    if request.status == TeardownStatus.PENDING and request.expires_at <= timezone.now():
        _move(request, TeardownStatus.EXPIRED)
        request.save(update_fields=["status"])
        audit("expired", f"Request #{request.pk} expired unapproved", None, request)
        return True
    return False


def _decide(request_pk, approver, comment):
    request = _locked(request_pk)
    if request.requester_id == approver.pk:
        raise PermissionDenied("The requester can never approve or reject their own request: ask a second person.")
    if not approver.has_perm("projects.approve_cost", request.instance.project):
        raise PermissionDenied("Only an approver of the box's project may approve or reject its teardown.")
    if request.status == TeardownStatus.EXPIRED:
        raise TeardownRefused(f"Request #{request.pk} has expired; request it again.")
    if request.status != TeardownStatus.PENDING:
        raise TeardownRefused(f"Request #{request.pk} is {request.get_status_display()}, not pending.")
    request.approver, request.decided_at, request.decision_comment = approver, timezone.now(), comment.strip()
    return request


def _expire_one(request_pk) -> None:
    """Its own transaction: the expiry stays recorded even though the decision is then refused."""
    with transaction.atomic(durable=True):
        _expire_if_due(_locked(request_pk))


def do_approve_teardown(request_pk, comment="", waive_active=False, *, actor):
    _expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, actor, comment)
        request.waive_active = waive_active
        # From the database only: re-hashing custody copies (or asking the box) belongs to the
        # request and to the execution, not to an approver's page request in between. Under the
        # instance lock, so two approvals that each leave the other's copy cannot both pass.
        fresh = checks.checks_for(request, deep=False)
        if not fresh["ok"]:
            raise TeardownRefused(f"Not approvable now: {checks.refusal({**fresh, 'blocking': _failing(fresh)})}")
        _move(request, TeardownStatus.APPROVED)
        request.save()
        waived = " (unclosed active/ waived)" if waive_active else ""
        audit("approved", f"Request #{request.pk} approved{waived}", actor, request, comment=comment)
        _enqueue_execution(request.pk)
    return request


def _failing(snapshot: dict) -> list[str]:
    return [item["label"] for item in snapshot["items"] if not item["ok"]]


def do_reject_teardown(request_pk, comment="", *, actor):
    _expire_one(request_pk)
    with transaction.atomic(durable=True):
        request = _decide(request_pk, actor, comment)
        _move(request, TeardownStatus.REJECTED)
        request.save()
        audit("rejected", f"Request #{request.pk} rejected", actor, request, comment=comment)
    return request


def do_cancel_teardown(request_pk, *, actor) -> TeardownRequest:
    """The requester withdraws a pending request (e.g. one whose check no longer passes); an approved
    request no worker took, or a failed one, is cancelled by its requester or an approver."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        settled = request.status in (TeardownStatus.APPROVED, TeardownStatus.FAILED)
        approver = settled and actor.has_perm("projects.approve_cost", request.instance.project)
        if request.requester_id != actor.pk and not approver:
            raise PermissionDenied("Only the requester may cancel a request; an approver rejects it.")
        _move(request, TeardownStatus.CANCELLED)
        if not settled:
            request.decided_at = timezone.now()
        request.save(update_fields=["status", "decided_at"])
        who = "its requester" if request.requester_id == actor.pk else actor.get_username()
        audit("cancelled", f"Request #{request.pk} cancelled by {who}", actor, request)
    return request


def do_redrive_approved(now=None) -> list[int]:
    """Beat: approved requests no worker took — their enqueue failed after the approval committed (a
    broker outage) — are enqueued again (the execution claims once, so a duplicate does nothing); after
    TEARDOWN_MAX_REDRIVES they fail with the reason, for a person to retry or cancel."""
    now = now or timezone.now()
    due = now - timedelta(seconds=settings.TEARDOWN_REDRIVE_SECONDS)
    waiting = TeardownRequest.objects.filter(status=TeardownStatus.APPROVED, decided_at__lte=due).exclude(
        redriven_at__gt=due
    )
    redriven = []
    for pk in waiting.values_list("pk", flat=True):
        with transaction.atomic(durable=True):
            request = _locked(pk)
            if request.status != TeardownStatus.APPROVED or (request.redriven_at and request.redriven_at > due):
                continue
            busy = TeardownRequest.objects.filter(instance_id=request.instance_id, status=TeardownStatus.EXECUTING)
            if request.redrives >= settings.TEARDOWN_MAX_REDRIVES and not busy.exists():
                _move(request, TeardownStatus.FAILED)
                request.failure = (
                    f"Approved {request.decided_at:%Y-%m-%d %H:%M:%S} but no worker took it after "
                    f"{request.redrives} re-drives (is the task queue down?): retry it, or cancel it."
                )
                request.save(update_fields=["status", "failure"])
                audit("failed", request.failure, None, request)
                continue
            request.redrives += 0 if busy.exists() else 1  # waiting behind another execution is no loss
            request.redriven_at = now
            request.save(update_fields=["redrives", "redriven_at"])
            audit("redriven", f"Request #{request.pk} approved but not executing: enqueued again", None, request)
            _enqueue_execution(request.pk)
            redriven.append(pk)
    return redriven


def do_begin_execution(request_pk, measured: "checks.Measured | None" = None) -> TeardownRequest | None:
    """Claim an approved request exactly once and re-check custody; None when there is nothing to run.

    measured: the checks' slow measurements (the box's idle scan over SSH, re-hashes where copies live),
    taken by the caller outside any transaction, so a slow box never holds the box's row lock (it held it
    for the 5 s of an SSH timeout, and the approved shutdown then failed as "custody changed"); the checks
    are judged here, under the lock, with them and the database as it is now. Without them (a direct
    caller) they are taken here.

    Raises EvidenceBusy while another consequence on the same box executes, and BoxUnconfirmed while the
    proofs could not measure the box: the caller retries.
    """
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.APPROVED:
            return None  # already executing, done, or never approved: a second caller does nothing
        executing = TeardownRequest.objects.filter(instance_id=request.instance_id, status=TeardownStatus.EXECUTING)
        if executing.exists():
            raise EvidenceBusy(f"request #{executing.first().pk} is executing on {request.instance.name}")
        request.check_at_execution = checks.checks_for(request, deep=measured or True)
        if waiting := checks.unconfirmed_only(request.check_at_execution):
            raise BoxUnconfirmed(waiting)
        if not request.check_at_execution["ok"]:
            _move(request, TeardownStatus.FAILED)
            why = checks.refusal({**request.check_at_execution, "blocking": _failing(request.check_at_execution)})
            request.failure = f"Custody changed since approval; refusing to execute: {why}"
            request.save()
            audit("refused", request.failure, None, request)
            return None
        _move(request, TeardownStatus.EXECUTING)
        request.attempts += 1
        request.started_at = timezone.now()
        request.save()
        audit(
            "executing",
            f"Executing request #{request.pk} (attempt {request.attempts})",
            None,
            request,
            idempotency_key=str(request.idempotency_key),
        )
    return request


def do_await_attestation(request_pk, steps: list[str]) -> None:
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        _move(request, TeardownStatus.AWAITING_ATTESTATION)
        request.provider_answer = {"console_steps": steps}
        request.save()
        audit("awaiting_attestation", f"Request #{request.pk}: console-only; steps shown", None, request)


def do_attest_teardown(request_pk, *, actor) -> TeardownRequest:
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.AWAITING_ATTESTATION:
            raise TeardownRefused(f"Request #{request.pk} is not waiting for an attestation.")
        _move(request, TeardownStatus.EXECUTING)
        request.attested_by, request.started_at = actor, timezone.now()
        request.save()
        audit("attested", f"{actor} attests the console steps of #{request.pk} were done", actor, request)
        _enqueue_execution(request.pk)
    return request


def do_finish_execution(
    request_pk, answer: dict, offline: bool | None = None, actor=None, expect=TeardownStatus.EXECUTING
) -> TeardownRequest:
    from fleet.actions import change_state_locked
    from fleet.models import INSTANCE_TRANSITIONS

    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != expect:
            raise TeardownRefused(f"Request #{request.pk} is {request.get_status_display()}, not {expect.label}.")
        _move(request, TeardownStatus.DONE)
        request.finished_at = timezone.now()
        request.provider_answer = {**request.provider_answer, **answer}
        request.offline_verified = offline
        request.failure = ""
        request.save()
        _apply_effects(request)
        offline_note = {True: "; verified offline", False: "; NOT verified offline", None: ""}[offline]
        audit("done", f"Request #{request.pk} done{offline_note}", actor, request, answer=answer)
        # The box's state moves in the same commit: nobody reads a done shutdown beside a running box.
        target = {TeardownKind.SHUTDOWN: "stopped", TeardownKind.RELEASE: "released"}.get(request.kind)
        reason = f"teardown request #{request.pk}"
        if request.kind == TeardownKind.SHUTDOWN and offline is False:
            # The power-off was sent but the box still answers: it may still bill; never call it stopped.
            target, reason = "unknown", f"shutdown #{request.pk} sent, but the box still answers"
        instance = request.instance
        if target and instance.state != target and target in INSTANCE_TRANSITIONS[instance.state]:
            change_state_locked(instance, target, reason, actor=None)
        if request.kind == TeardownKind.RELEASE and by_api(instance, request.kind):
            _enqueue_recheck(request.pk)  # one 404 is not gone: read it again soon
    return request


def _enqueue_recheck(request_id: int) -> None:

    countdown = settings.TEARDOWN_RELEASE_RECHECK_SECONDS
    after_commit("delivery.tasks.recheck_release", request_id, countdown=countdown)


def _apply_effects(request) -> None:
    now = timezone.now()
    if request.kind == TeardownKind.RELEASE and request.retire_hold:
        for hold in ReleaseHold.objects.select_for_update().filter(instance=request.instance, retired_at__isnull=True):
            hold.retired_at, hold.retired_by, hold.retired_by_request = now, request.approver, request
            hold.retired_reason = f"retired by L3-approved release #{request.pk}: {request.decision_comment}"
            hold.save()
            audit("hold_retired", hold.retired_reason, request.approver, request)
    if request.kind == TeardownKind.DELETE_EVIDENCE:
        _mark_gone(request.run, [request.location], now)
        return
    if request.kind == TeardownKind.DELETE_RESOURCE:
        type(request.resource).objects.filter(pk=request.resource_id).update(deleted_at=now)
        planned = Consequence.of(request)
        for run in request.instance.runs.filter(state=RunState.EXPORTED).select_related("project", "instance"):
            _mark_gone(run, [copy.location for copy in touched(run, planned)], now)
        return
    # What the consequence wiped is gone for good (delivery.evidence.wiped_by, the one rule).
    happened, profile = Consequence.of(request), request.instance.profile
    for run in request.instance.runs.filter(state=RunState.EXPORTED).select_related("project", "instance"):
        _mark_gone(run, [c.location for c in copies_of(run) if wiped_by(happened, c, profile)], now)


def _mark_gone(run, locations, now) -> None:
    record = latest_verified(run)
    if EvidenceLocation.NODE in locations:
        type(run).objects.filter(pk=run.pk).update(export_deleted_at=now)
    if record and EvidenceLocation.CUSTODY in locations:
        type(record).objects.filter(pk=record.pk).update(copy_deleted_at=now)
    if record and EvidenceLocation.MIRROR in locations:
        type(record).objects.filter(pk=record.pk).update(mirror_deleted_at=now)


def do_fail_unconfirmed(request_pk, why: str, tries: int) -> TeardownRequest | None:
    """An approved request whose box could not be measured, try after try: failed saying so (custody did
    not change; nothing ran), so a person requests it again once the box answers."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.APPROVED:
            return None
        _move(request, TeardownStatus.FAILED)
        request.failure = (
            f"The box could not be measured before executing, {tries} tries: {why}. Nothing was executed and "
            "custody did not change: request it again once the box answers."
        )
        request.finished_at = timezone.now()
        request.save()
        audit("failed", f"Request #{request.pk}: {request.failure}", None, request)
    return request


def do_fail_execution(request_pk, error: str) -> TeardownRequest:
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        _move(request, TeardownStatus.FAILED)
        request.failure, request.finished_at = error, timezone.now()
        request.save()
        audit("failed", f"Request #{request.pk} failed: {error}", None, request)
    return request


def do_retry_execution(request_pk, *, actor) -> TeardownRequest:
    """A failed execution of an approved request may run again (same idempotency key)."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.FAILED or request.decided_at is None:
            raise TeardownRefused("Only a failed execution of an approved request can be retried.")
        _move(request, TeardownStatus.APPROVED)
        request.save(update_fields=["status"])
        audit("retried", f"Retry of request #{request.pk}", actor, request)
        _enqueue_execution(request.pk)
    return request


def do_record_provider_status(request_pk, status: dict) -> None:
    """Not a state change: what the provider said when the execution was found interrupted."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        request.provider_answer = {**request.provider_answer, "status_when_interrupted": status}
        request.save(update_fields=["provider_answer"])
        audit("provider_status", f"Provider says: {status.get('status')}", None, request, status=status)


def do_reopen_release(request_pk, state: str) -> TeardownRequest:
    """A release done by API whose box the provider lists again (read soon after): re-opened as still
    billing for a person, the box no longer called released, its approvers told. The copies it wiped
    stay counted as gone (the least-surviving reading)."""
    from fleet.actions import change_state_locked

    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.DONE or request.kind != TeardownKind.RELEASE:
            return request
        _move(request, TeardownStatus.NEEDS_ATTENTION)
        name = request.instance.profile.name
        request.failure = (
            f"Still billing: {name} lists the box again ({state}) after its release was done. "
            "Check the console: settle it as done only once the provider no longer lists it, or retry."
        )
        request.save(update_fields=["status", "failure"])
        audit("needs_attention", request.failure, None, request)
        instance = request.instance
        if instance.state == InstanceState.RELEASED:
            change_state_locked(instance, InstanceState.UNKNOWN, f"release #{request.pk} listed again", actor=None)
    return request


def do_need_person(request_pk, answer: dict, reason: str) -> TeardownRequest:
    """An execution whose effect the provider or the box contradicts: a person decides (it happened,
    or retry with the same key). The box keeps its state, stays in spend and keeps being probed."""
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.EXECUTING:
            return request
        _move(request, TeardownStatus.NEEDS_ATTENTION)
        request.provider_answer = {**request.provider_answer, **answer}
        request.failure = reason
        request.save(update_fields=["status", "provider_answer", "failure"])
        audit("needs_attention", reason, None, request)
    return request


def do_flag_stuck_executions() -> list[int]:
    """Executions whose worker vanished past the lease need a person: never a second provider call."""
    due = timezone.now() - timedelta(seconds=settings.TEARDOWN_EXECUTION_LEASE)
    flagged = []
    for pk in TeardownRequest.objects.filter(status=TeardownStatus.EXECUTING, started_at__lt=due).values_list(
        "pk", flat=True
    ):
        with transaction.atomic(durable=True):
            request = _locked(pk)
            if request.status != TeardownStatus.EXECUTING or request.started_at >= due:
                continue
            _move(request, TeardownStatus.NEEDS_ATTENTION)
            request.failure = (
                f"The worker executing this stopped answering (started {request.started_at:%Y-%m-%d %H:%M:%S}); "
                "the provider call may or may not have happened. An approver decides: it happened, or retry "
                "with the same idempotency key."
            )
            request.save(update_fields=["status", "failure"])
            audit("needs_attention", request.failure, None, request)
            flagged.append(pk)
    return flagged


def do_resolve_attention(request_pk, happened: bool, comment: str = "", *, actor) -> TeardownRequest:
    """An approver settles an interrupted execution: it happened (done), or retry with the same key."""
    project = Project.objects.get(instances__teardown_requests=request_pk)
    if not actor.has_perm("projects.approve_cost", project):
        raise PermissionDenied("Only an approver of the box's project may settle an interrupted execution.")
    if happened:
        answer = {"settled_by": actor.get_username(), "comment": comment}
        return do_finish_execution(request_pk, answer, actor=actor, expect=TeardownStatus.NEEDS_ATTENTION)
    with transaction.atomic(durable=True):
        request = _locked(request_pk)
        if request.status != TeardownStatus.NEEDS_ATTENTION:
            raise TeardownRefused(f"Request #{request.pk} does not need a person.")
        _move(request, TeardownStatus.APPROVED)
        request.save(update_fields=["status"])
        audit(
            "retried", f"{actor} retries #{request.pk} with the same idempotency key", actor, request, comment=comment
        )
        _enqueue_execution(request.pk)
    return request


def do_place_hold(instance_pk, reason, *, actor) -> ReleaseHold:
    if not reason.strip():
        raise TeardownRefused("Say why this box must never be released.")
    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_pk)
        hold = ReleaseHold.objects.create(instance=instance, created_by=actor, reason=reason.strip())
        audit("hold_placed", f"“Never release” hold on {instance.name}: {hold.reason}", actor, instance=instance)
    return hold


def do_expire_requests() -> int:
    due = TeardownRequest.objects.filter(status=TeardownStatus.PENDING, expires_at__lte=timezone.now())
    pks = list(due.values_list("pk", flat=True))
    for pk in pks:
        _expire_one(pk)  # each under its instance lock, like every other move
    return len(pks)
