"""What a project is told about its runs, composed from names, states and failure
classes only (never a log excerpt: a training log may print a token); delivered by notifications."""

from django.conf import settings

from notifications.actions import do_notify
from notifications.models import Event


def announce(run, event: Event, headline: str, **data) -> None:
    """Inside the transaction that made the change: the notification commits with it or not at all."""
    url = f"{settings.SITE_URL}{run.get_absolute_url()}"
    text = f"{run.run_id} on {run.instance.name} ({run.project.name}): {headline}\n{url}"
    facts = {"run": run.run_id, "instance": run.instance.name, "state": run.state, "url": url, **data}
    do_notify(run.project_id, event, f"{run.run_id}: {headline}"[:160], text, facts)
