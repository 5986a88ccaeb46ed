"""Filtering and exporting the append-only audit log."""

import csv
import io
import json
from datetime import datetime

from django.http import HttpResponse

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
