"""The append-only audit log of teardown: writing an entry (and telling the project what it notifies),
filtering and exporting them."""

import csv
import io
import json
from datetime import datetime

from django.conf import settings
from django.http import HttpResponse

from custody.models import AuditEntry
from notifications.actions import do_notify
from notifications.models import Event
from profiles.live import instance_changed

AUDIT_ACTIONS = [
    "requested",
    "refused",
    "approved",
    "rejected",
    "expired",
    "executing",
    "awaiting_attestation",
    "attested",
    "done",
    "failed",
    "retried",
    "hold_placed",
    "hold_retired",
    "cache_cleanup",
]
COLUMNS = ["at", "action", "actor", "instance", "request", "message"]


def _date(text: str):
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        return None


def filter_audit(entries, query):
    if query.get("action") in AUDIT_ACTIONS:
        entries = entries.filter(action=query["action"])
    if query.get("instance"):
        entries = entries.filter(instance__name=query["instance"])
    if query.get("actor"):
        entries = entries.filter(actor__username=query["actor"])
    if query.get("request", "").isdigit():
        entries = entries.filter(request_id=int(query["request"]))
    if since := _date(query.get("since", "")):
        entries = entries.filter(at__date__gte=since)
    if until := _date(query.get("until", "")):
        entries = entries.filter(at__date__lte=until)
    return entries


def row(entry) -> dict:
    return {
        "at": entry.at.isoformat(),
        "action": entry.action,
        "actor": entry.actor.get_username() if entry.actor else "",
        "instance": entry.instance.name if entry.instance else "",
        "request": entry.request_id or "",
        "message": entry.message,
    }


def export_audit(entries, fmt: str) -> HttpResponse:
    rows = [row(entry) for entry in entries.iterator()]
    if fmt == "json":
        response = HttpResponse(json.dumps(rows, indent=2), content_type="application/json")
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
        response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="remotegpu-audit.{fmt}"'
    return response


NOTIFIED = {
    "requested": Event.TEARDOWN_REQUESTED,
    "approved": Event.TEARDOWN_APPROVED,
    "done": Event.TEARDOWN_DONE,
    "failed": Event.TEARDOWN_FAILED,
    "needs_attention": Event.TEARDOWN_FAILED,
}


def audit(action: str, message: str, actor=None, request=None, instance=None, **data) -> AuditEntry:
    instance = instance or (request.instance if request else None)
    entry = AuditEntry.objects.create(
        action=action, message=message, actor=actor, request=request, instance=instance, data=data
    )
    if instance is not None:
        instance_changed(instance.pk)  # its page's teardown panel follows
    if request is not None and action in NOTIFIED:
        facts = {"request": request.pk, "kind": request.kind, "level": request.level, "instance": instance.name}
        who = f" by {actor.get_username()}" if actor else ""
        text = f"{instance.name}: {message}{who}"
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
