"""Instance names: `<project>-<purpose>-<yyyymmdd>`, so a bill line says whose box it is and since when."""

import datetime as dt
import re

from django.utils.text import slugify

PURPOSE = r"[a-z0-9]+(?:-[a-z0-9]+)*"


def suggest_name(project_slug: str, purpose: str, today: dt.date) -> str:
    cleaned = slugify(purpose) or "train"
    return f"{project_slug}-{cleaned}-{today:%Y%m%d}"


def name_problem(name: str, project_slug: str) -> str | None:
    """Why name breaks the rule, or None when it follows it."""
    match = re.fullmatch(rf"{re.escape(project_slug)}-({PURPOSE})-([0-9]{{8}})", name)
    if not match:
        return f"Name instances <project>-<purpose>-<yyyymmdd>, starting with the project slug “{project_slug}”."
    try:
        dt.datetime.strptime(match.group(2), "%Y%m%d")
    except ValueError:
        return f"“{match.group(2)}” is not a real date (yyyymmdd)."
    return None


def purpose_guess(name: str, project_slug: str) -> str:
    """The middle of a mistyped name, to build a suggestion from."""
    rest = name.removeprefix(project_slug).strip("-_ ")
    return re.sub(r"[-_ ]?[0-9]{6,8}$", "", rest) or "train"
