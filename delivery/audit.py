"""Teardown's entries in the one audit log (core.audit): each written with the box's page told, and the
project notified of what it asks to hear."""

from django.conf import settings

from core.audit import record
from core.models import AuditEntry
from fleet.live import instance_changed
from notifications.actions import do_notify
from notifications.models import Event

NOTIFIED = {
    "requested": Event.TEARDOWN_REQUESTED,
    "approved": Event.TEARDOWN_APPROVED,
    "done": Event.TEARDOWN_DONE,
    "failed": Event.TEARDOWN_FAILED,
    "needs_attention": Event.TEARDOWN_FAILED,
}


def audit(action: str, message: str, actor=None, request=None, instance=None, **data) -> AuditEntry:
    instance = instance or (request.instance if request else None)
    entry = record(action, message, actor=actor, request=request, instance=instance, **data)
    if instance is not None:
        instance_changed(instance.pk)  # its page's teardown panel follows
    if request is not None and action in NOTIFIED:
        facts = {"request": request.pk, "kind": request.kind, "level": request.level, "instance": instance.name}
        who = f" by {actor.get_username()}" if actor else ""
        text = f"{instance.name}: {message}{who}"
        if action == "needs_attention":  # an approver settles it: told whatever they chose
            facts.update(awaits_approval=True, asked_by=None)
        if action == "requested" and request.status == "pending":  # its approvers are told, never its asker
            facts.update(
                awaits_approval=True,
                asked_by=actor.pk if actor else None,
                target=request.target,
                reason=request.reason,
                expires_at=request.expires_at.isoformat(),
            )
            text += f"\nReason: {request.reason}\nApprove or reject by {request.expires_at:%Y-%m-%d %H:%M} UTC:"
            text += f" {settings.SITE_URL}{request.get_absolute_url()}"
        do_notify(instance.project_id, NOTIFIED[action], f"{instance.name}: {message}"[:160], text, facts)
    return entry
