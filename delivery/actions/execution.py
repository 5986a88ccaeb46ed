"""An approved request carried out: claimed once, custody re-checked, executed (or its console steps
attested), finished or failed, retried with the same idempotency key, and re-driven when no worker took it."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.enqueue import after_commit
from delivery import checks
from delivery.actions.base import (
    BoxUnconfirmed,
    EvidenceBusy,
    TeardownRefused,
    enqueue_execution,
    failing,
    locked,
    move,
)
from delivery.actions.effects import apply_effects
from delivery.audit import audit
from delivery.models import (
    TeardownKind,
    TeardownRequest,
    TeardownStatus,
)
from fleet.provider_calls import by_api


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
        request = locked(request_pk)
        if request.status != TeardownStatus.APPROVED:
            return None  # already executing, done, or never approved: a second caller does nothing
        executing = TeardownRequest.objects.filter(instance_id=request.instance_id, status=TeardownStatus.EXECUTING)
        if executing.exists():
            raise EvidenceBusy(f"request #{executing.first().pk} is executing on {request.instance.name}")
        request.check_at_execution = checks.checks_for(request, deep=measured or True)
        if waiting := checks.unconfirmed_only(request.check_at_execution):
            raise BoxUnconfirmed(waiting)
        if not request.check_at_execution["ok"]:
            move(request, TeardownStatus.FAILED)
            why = checks.refusal({**request.check_at_execution, "blocking": failing(request.check_at_execution)})
            request.failure = f"Custody changed since approval; refusing to execute: {why}"
            request.save()
            audit("refused", request.failure, None, request)
            return None
        move(request, TeardownStatus.EXECUTING)
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
        request = locked(request_pk)
        move(request, TeardownStatus.AWAITING_ATTESTATION)
        request.provider_answer = {"console_steps": steps}
        request.save()
        audit("awaiting_attestation", f"Request #{request.pk}: console-only; steps shown", None, request)


def do_attest_teardown(request_pk, *, actor) -> TeardownRequest:
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.AWAITING_ATTESTATION:
            raise TeardownRefused(f"Request #{request.pk} is not waiting for an attestation.")
        move(request, TeardownStatus.EXECUTING)
        request.attested_by, request.started_at = actor, timezone.now()
        request.save()
        audit("attested", f"{actor} attests the console steps of #{request.pk} were done", actor, request)
        enqueue_execution(request.pk)
    return request


def do_finish_execution(
    request_pk, answer: dict, offline: bool | None = None, actor=None, expect=TeardownStatus.EXECUTING
) -> TeardownRequest:
    from fleet.actions import change_state_locked
    from fleet.models import INSTANCE_TRANSITIONS

    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != expect:
            raise TeardownRefused(f"Request #{request.pk} is {request.get_status_display()}, not {expect.label}.")
        move(request, TeardownStatus.DONE)
        request.finished_at = timezone.now()
        request.provider_answer = {**request.provider_answer, **answer}
        request.offline_verified = offline
        request.failure = ""
        request.save()
        apply_effects(request)
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


def do_fail_unconfirmed(request_pk, why: str, tries: int) -> TeardownRequest | None:
    """An approved request whose box could not be measured, try after try: failed saying so (custody did
    not change; nothing ran), so a person requests it again once the box answers."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.APPROVED:
            return None
        move(request, TeardownStatus.FAILED)
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
        request = locked(request_pk)
        move(request, TeardownStatus.FAILED)
        request.failure, request.finished_at = error, timezone.now()
        request.save()
        audit("failed", f"Request #{request.pk} failed: {error}", None, request)
    return request


def do_retry_execution(request_pk, *, actor) -> TeardownRequest:
    """A failed execution of an approved request may run again (same idempotency key)."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.FAILED or request.decided_at is None:
            raise TeardownRefused("Only a failed execution of an approved request can be retried.")
        move(request, TeardownStatus.APPROVED)
        request.save(update_fields=["status"])
        audit("retried", f"Retry of request #{request.pk}", actor, request)
        enqueue_execution(request.pk)
    return request


def do_record_provider_status(request_pk, status: dict) -> None:
    """Not a state change: what the provider said when the execution was found interrupted."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        request.provider_answer = {**request.provider_answer, "status_when_interrupted": status}
        request.save(update_fields=["provider_answer"])
        audit("provider_status", f"Provider says: {status.get('status')}", None, request, status=status)


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
            request = locked(pk)
            if request.status != TeardownStatus.APPROVED or (request.redriven_at and request.redriven_at > due):
                continue
            busy = TeardownRequest.objects.filter(instance_id=request.instance_id, status=TeardownStatus.EXECUTING)
            if request.redrives >= settings.TEARDOWN_MAX_REDRIVES and not busy.exists():
                move(request, TeardownStatus.FAILED)
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
            enqueue_execution(request.pk)
            redriven.append(pk)
    return redriven
