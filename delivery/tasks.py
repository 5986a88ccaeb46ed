"""Celery wrappers for DELIVER: proofs, execution, the release re-check, expiry, the reconciler, cache
cleanup and waste alarms. SSH and provider calls happen here, outside any transaction; results go through
actions."""

import time

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError
from kombu.exceptions import OperationalError as KombuOperationalError

from delivery import execution
from delivery.actions.attention import do_flag_stuck_executions
from delivery.actions.base import BoxUnconfirmed, EvidenceBusy
from delivery.actions.decisions import do_expire_requests
from delivery.actions.execution import do_fail_unconfirmed, do_record_provider_status, do_redrive_approved
from delivery.actions.proofs import do_redrive_checking, do_settle_teardown_proofs, do_start_proofs


@shared_task(
    bind=True,
    acks_late=True,
    soft_time_limit=settings.TEARDOWN_EXECUTION_TIME_LIMIT - 60,
    time_limit=settings.TEARDOWN_EXECUTION_TIME_LIMIT,
    max_retries=None,
)
def execute_teardown(self, request_id: int) -> str:
    try:
        return execution.execute(request_id)
    except BoxUnconfirmed as exc:
        # A slow or unreachable box says nothing of custody: asked again, a bounded number of times.
        if self.request.retries >= settings.TEARDOWN_UNCONFIRMED_RETRIES:
            do_fail_unconfirmed(request_id, str(exc), self.request.retries + 1)
            return "failed"
        raise self.retry(countdown=settings.TEARDOWN_BUSY_RETRY_SECONDS) from None
    except EvidenceBusy:
        # Consequences on one box run one at a time; the request stays approved meanwhile.
        raise self.retry(countdown=settings.TEARDOWN_BUSY_RETRY_SECONDS) from None


# Gathering proofs changes nothing on the box and settling checks the request's state under its lock: a
# database or broker error retries the task instead of acking it (a killed connection, a Redis restart);
# what no retry reaches, the reconciler re-drives at the request's deadline.
TRANSIENT = {
    "autoretry_for": (DatabaseError, KombuOperationalError),
    "retry_backoff": 2,
    "retry_backoff_max": 30,
    "max_retries": 8,
}


@shared_task(
    acks_late=True,
    soft_time_limit=settings.TEARDOWN_PROOF_SECONDS - 30,
    time_limit=settings.TEARDOWN_PROOF_SECONDS,
    **TRANSIENT,
)
def prove_teardown(request_id: int) -> str:
    """A filed request's deep proofs, gathered here outside any transaction (a slow box holds no lock
    and no web worker), then judged under the lock."""
    from delivery import checks
    from delivery.models import TeardownRequest

    if not do_start_proofs(request_id):
        return "nothing to do"  # settled already (a redelivery), or cancelled
    request = TeardownRequest.objects.select_related("instance__project", "run", "resource").get(pk=request_id)
    began = time.monotonic()
    proofs = checks.checks_for(request)
    return do_settle_teardown_proofs(request.pk, proofs, time.monotonic() - began).status


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150, **TRANSIENT)
def recheck_release(request_id: int) -> str:
    return execution.recheck_release(request_id)


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def expire_teardown_requests() -> int:
    return do_expire_requests()


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def flag_stuck_teardowns() -> list[int]:
    """Beat: requests whose proofs never came are proved again (or refused); approved requests no worker
    took are enqueued again (or fail for a person); interrupted executions need a person: ask the
    provider what it sees, for that person."""
    from delivery.models import TeardownRequest
    from fleet.provider_calls import provider_status

    do_redrive_checking()
    do_redrive_approved()
    flagged = do_flag_stuck_executions()
    for request in TeardownRequest.objects.filter(pk__in=flagged).select_related("instance"):
        do_record_provider_status(request.pk, provider_status(request.instance))
    return flagged


@shared_task(acks_late=True, soft_time_limit=300, time_limit=330)
def clean_caches(instance_id: int) -> dict:
    from delivery.caches import clean

    return clean(instance_id)


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def raise_waste_alarms() -> list[int]:
    """Beat: every box that bills for nothing, alarmed at each threshold once."""
    from delivery.waste import do_raise_waste_alarms

    return do_raise_waste_alarms()
