"""Celery wrappers: deliver one notification; beat re-drives what was left undelivered."""

from celery import shared_task

from notifications.actions import do_deliver_notification, undelivered


@shared_task(acks_late=True, soft_time_limit=120, time_limit=150)
def deliver_notification(notification_id: int) -> str:
    return do_deliver_notification(notification_id) or "held elsewhere"


@shared_task(acks_late=True, soft_time_limit=60, time_limit=90)
def redeliver_notifications() -> int:
    ids = list(undelivered().values_list("pk", flat=True)[:200])
    for notification_id in ids:
        deliver_notification.delay(notification_id)
    return len(ids)
