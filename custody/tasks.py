"""Celery wrappers for custody work: verification and its reconciler."""

from celery import shared_task

from custody.models import CustodyRecord, CustodyStatus


@shared_task(acks_late=True, soft_time_limit=3600, time_limit=3660)
def verify_custody(record_id: int) -> str:
    # Loaded here, by the worker that verifies: torch, numpy and pyarrow stay out of every other
    # worker (one that only watches boxes carries about a third of the memory).
    from custody import verify

    record = CustodyRecord.objects.select_related("run__project", "run__instance").filter(pk=record_id).first()
    if record is None or record.status in (CustodyStatus.VERIFIED, CustodyStatus.FAILED):
        return "nothing to do"  # a redelivery after the record was finished
    verify.verify(record)  # a redelivered pull resumes from the .partial files already in custody
    return "done"


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def reconcile_custody() -> int:
    from custody.actions import do_fail_stranded_records

    return do_fail_stranded_records()
