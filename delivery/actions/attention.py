"""Executions a person must settle: a worker that vanished, an effect the provider or the box contradicts, a
release the provider lists again."""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from delivery.actions.base import TeardownRefused, enqueue_execution, locked, move
from delivery.actions.execution import do_finish_execution
from delivery.audit import audit
from delivery.models import (
    TeardownKind,
    TeardownRequest,
    TeardownStatus,
)
from fleet.models import InstanceState
from projects.models import Project


def do_need_person(request_pk, answer: dict, reason: str) -> TeardownRequest:
    """An execution whose effect the provider or the box contradicts: a person decides (it happened,
    or retry with the same key). The box keeps its state, stays in spend and keeps being probed."""
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.EXECUTING:
            return request
        move(request, TeardownStatus.NEEDS_ATTENTION)
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
            request = locked(pk)
            if request.status != TeardownStatus.EXECUTING or request.started_at >= due:
                continue
            move(request, TeardownStatus.NEEDS_ATTENTION)
            request.failure = (
                f"The worker executing this stopped answering (started {request.started_at:%Y-%m-%d %H:%M:%S}); "
                "the provider call may or may not have happened. An approver decides: it happened, or retry "
                "with the same idempotency key."
            )
            request.save(update_fields=["status", "failure"])
            audit("needs_attention", request.failure, None, request)
            flagged.append(pk)
    return flagged


def do_reopen_release(request_pk, state: str) -> TeardownRequest:
    """A release done by API whose box the provider lists again (read soon after): re-opened as still
    billing for a person, the box no longer called released, its approvers told. The copies it wiped
    stay counted as gone (the least-surviving reading)."""
    from fleet.actions import change_state_locked

    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.DONE or request.kind != TeardownKind.RELEASE:
            return request
        move(request, TeardownStatus.NEEDS_ATTENTION)
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


def do_resolve_attention(request_pk, happened: bool, comment: str = "", *, actor) -> TeardownRequest:
    """An approver settles an interrupted execution: it happened (done), or retry with the same key."""
    project = Project.objects.get(instances__teardown_requests=request_pk)
    if not actor.has_perm("projects.approve_cost", project):
        raise PermissionDenied("Only an approver of the box's project may settle an interrupted execution.")
    if happened:
        answer = {"settled_by": actor.get_username(), "comment": comment}
        return do_finish_execution(request_pk, answer, actor=actor, expect=TeardownStatus.NEEDS_ATTENTION)
    with transaction.atomic(durable=True):
        request = locked(request_pk)
        if request.status != TeardownStatus.NEEDS_ATTENTION:
            raise TeardownRefused(f"Request #{request.pk} does not need a person.")
        move(request, TeardownStatus.APPROVED)
        request.save(update_fields=["status"])
        audit(
            "retried", f"{actor} retries #{request.pk} with the same idempotency key", actor, request, comment=comment
        )
        enqueue_execution(request.pk)
    return request
