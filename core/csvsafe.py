"""CSV cells a spreadsheet opens as text, never as a formula (OWASP's CSV injection rule).

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is run as a formula by Excel,
LibreOffice and Sheets. Usernames, run ids, slugs and messages reach our exports from people and from
boxes, so every exported cell passes through `neutral`: such a cell gets a leading `'`, which the
spreadsheet shows as text and hides. The csv module quotes what needs quoting (and doubles quotes)."""

import csv
import io

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def write_csv(columns: list[str], rows) -> str:
    """The rows (dicts keyed by column) as CSV text, every cell and header neutral."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([neutral(column) for column in columns])
    for row in rows:
        writer.writerow([neutral(row.get(column, "")) for column in columns])
    return buffer.getvalue()
