"""`{{ value|when }}`: one way to show a moment on every page.

The server writes UTC with its zone (what a page without script shows); static/js/local_times.js
rewrites each <time data-when> into the reader's local time, with the zone named, in the same
shape. Styles: "minutes" (default, 2026-11-30 18:32), "seconds", "short" (11-30 18:32:05), "time"
(18:32:05), "date".
"""

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html

register = template.Library()

FORMATS = {
    "minutes": "%Y-%m-%d %H:%M",
    "seconds": "%Y-%m-%d %H:%M:%S",
    "short": "%m-%d %H:%M:%S",
    "time": "%H:%M:%S",
    "date": "%Y-%m-%d",
}


@register.filter
def when(value, style: str = "minutes"):
    if not isinstance(value, datetime):
        return ""
    style = style if style in FORMATS else "minutes"
    utc = value.astimezone(UTC)
    shown = utc.strftime(FORMATS[style]) + ("" if style == "date" else " UTC")
    return format_html('<time datetime="{}" data-when="{}">{}</time>', utc.isoformat(), style, shown)


@register.filter
def pretty_json(value) -> str:
    """A stored answer (a provider's JSON) as indented JSON, never a Python repr; escaped by the template."""
    import json

    try:
        return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
