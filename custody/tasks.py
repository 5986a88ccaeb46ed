"""Celery wrappers for custody work (L1: re-runnable any time, never changes the node's export)."""

from celery import shared_task

from custody import verify
from custody.models import CustodyRecord, CustodyStatus


@shared_task(acks_late=True, soft_time_limit=3600, time_limit=3660)
def verify_custody(record_id: int) -> str:
    record = CustodyRecord.objects.select_related("run__project", "run__instance").filter(pk=record_id).first()
    if record is None or record.status in (CustodyStatus.VERIFIED, CustodyStatus.FAILED):
        return "nothing to do"  # a redelivery after the record was finished
    verify.verify(record)  # a redelivered pull resumes from the .partial files already in custody
    return "done"
