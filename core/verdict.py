"""`{{ check|verdict }}`: a custody check snapshot ({"ok", "items": [{label, ok, detail, waivable}]}) as
a page shows it at team scale: its verdict in one line, the failing items first, the passing ones
counted (issue 49: the one failing check sat below a dozen green paragraphs)."""

from django import template

register = template.Library()
SHOWN = 25


@register.filter
def verdict(check) -> dict:
    items = list((check or {}).get("items") or [])
    failing = [item for item in items if not item.get("ok")]
    passing = [item for item in items if item.get("ok")]
    if not items:
        line = "Not checked yet."
    elif not failing:
        line = f"All {len(items)} checks pass."
    else:
        first = failing[0]
        blocked = "Needs an approver's waiver" if all(item.get("waivable") for item in failing) else "Blocked"
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        line = f"{blocked}: {first.get('label')} — {first.get('detail')}{more}"
    # At most SHOWN of each, the rest counted: a box with 1,000 exports has 1,000 evidence items.
    return {
        "line": line,
        "ok": not failing and bool(items),
        "failing": failing[:SHOWN],
        "failing_more": max(0, len(failing) - SHOWN),
        "passing": passing[:SHOWN],
        "passing_count": len(passing),
        "passing_more": max(0, len(passing) - SHOWN),
    }
