"""Push a message to everyone watching a run page (best effort: the DB stays the truth)."""

from fleet.live import send


def run_group(run_id: str) -> str:
    return f"run-{run_id}"


def project_group(slug: str) -> str:
    return f"project-{slug}"


def push_run_update(run_id: str, payload: dict, project_slug: str | None = None) -> None:
    """Best effort: the database stays the truth; a page that reconnects re-reads it."""
    message = {**payload, "run_id": run_id}
    send(run_group(run_id), message)
    if project_slug and payload.get("type") in ("event", "status"):
        send(project_group(project_slug), message)
