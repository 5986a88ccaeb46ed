"""Writing the audit log (the one writer every action calls), filtering it and exporting it."""

import json
from datetime import datetime

from django.http import HttpResponse

from core.csvsafe import write_csv
from core.models import AuditAction, AuditEntry
from wrapper.digits import ascii_int

COLUMNS = ["at", "action", "actor", "project", "instance", "run", "request", "subject", "message"]
LINKS = ("project", "instance", "run", "request", "credential", "subject")


def record(action: str, message: str, *, actor=None, **links_and_data) -> AuditEntry:
    """One entry, in the caller's transaction (a change and its record commit together, or neither).
    Keyword arguments named in LINKS (or their `_id`) are what it touched; any other keyword is kept in its data.
    What a run, a request or a box belongs to (a run's box and project, a request's box, a box's project)
    is filled in from it."""
    if action not in AuditAction.values:
        raise ValueError(f"{action!r} is not an audit action")
    links = {key: links_and_data.pop(key) for key in list(links_and_data) if key.removesuffix("_id") in LINKS}
    for owner in ("run", "request", "instance"):
        for field in ("instance_id", "project_id"):
            value = getattr(links.get(owner), field, None)
            if value is not None and field not in links and field.removesuffix("_id") not in links:
                links[field] = value
    return AuditEntry.objects.create(action=action, message=message, actor=actor, data=links_and_data, **links)


def _date(text: str):
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        return None


def filter_audit(entries, query):
    """What the page's filters ask, each ignored when it is not one of ours (never an error)."""
    areas = AuditAction.areas()
    if query.get("area") in areas:
        entries = entries.filter(action__in=areas[query["area"]])
    if query.get("action") in AuditAction.values:
        entries = entries.filter(action=query["action"])
    for field, lookup in (
        ("project", "project__slug"),
        ("instance", "instance__name"),
        ("actor", "actor__username"),
        ("subject", "subject__username"),
        ("run", "run__run_id"),
    ):
        if query.get(field):
            entries = entries.filter(**{lookup: query[field]})
    if (request_id := ascii_int(query.get("request", ""))) is not None:
        entries = entries.filter(request_id=request_id)
    if since := _date(query.get("since", "")):
        entries = entries.filter(at__date__gte=since)
    if until := _date(query.get("until", "")):
        entries = entries.filter(at__date__lte=until)
    return entries


def row(entry) -> dict:
    def name(user):
        return user.get_username() if user else ""

    return {
        "at": entry.at.isoformat(),
        "action": entry.action,
        "actor": name(entry.actor),
        "project": entry.project.slug if entry.project else "",
        "instance": entry.instance.name if entry.instance else "",
        "run": entry.run.run_id if entry.run else "",
        "request": entry.request_id or "",
        "subject": name(entry.subject),
        "message": entry.message,
    }


def export_audit(entries, fmt: str) -> HttpResponse:
    rows = [row(entry) for entry in entries.iterator()]
    if fmt == "json":
        response = HttpResponse(json.dumps(rows, indent=2), content_type="application/json")
    else:
        response = HttpResponse(write_csv(COLUMNS, rows), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="remotegpu-audit.{fmt}"'
    return response
