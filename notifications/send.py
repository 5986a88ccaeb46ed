"""Senders, one per kind of target; each returns nothing or raises SendFailed with a reason that
never repeats a secret (an apprise URL holds the chat service's token, so its text is never shown)."""

import logging
import os

import apprise
from django.conf import settings
from django.core.mail import send_mail

from notifications import webhooks
from notifications.models import NotifyVariable

log = logging.getLogger(__name__)


class SendFailed(Exception):
    """A target did not take the message; str() is safe to store and show."""


def env_name_problem(name: str) -> str | None:
    """Only variables the deployment set aside for notification URLs may be named by an operator:
    naming DATABASE_URL would post the database password to wherever it points."""
    prefix = settings.NOTIFY_URL_ENV_PREFIX
    if not name.startswith(prefix) or not name[len(prefix) :].replace("_", "").isalnum():
        return f"Name an environment variable starting with {prefix} (letters, digits and _)."
    return None


def grant_problem(project_id: int, name: str) -> str | None:
    """A variable is named by a project only where an administrator granted it: checked when a
    channel is added and again at every send, so a revoked grant stops the next message."""
    if NotifyVariable.objects.filter(variable=name, projects__pk=project_id).exists():
        return None
    return (
        f"{name} is not a notification variable granted to this project: an administrator registers "
        "it and grants it on the Notification variables page."
    )


def to_webhook(url: str, payload: dict) -> None:
    try:
        status = webhooks.post_json(url, payload, timeout=settings.NOTIFY_TIMEOUT)
    except webhooks.WebhookRefused as exc:
        raise SendFailed(f"refused: {exc}") from None
    except OSError as exc:
        raise SendFailed(f"not reached: {exc.strerror or type(exc).__name__}") from None
    if not 200 <= status < 300:
        raise SendFailed(f"answered HTTP {status}")


def to_apprise(url_env: str, project_id: int, subject: str, text: str) -> None:
    problem = env_name_problem(url_env) or grant_problem(project_id, url_env)
    if problem:
        raise SendFailed(problem)
    url = os.environ.get(url_env, "")
    if not url:
        raise SendFailed(f"{url_env} is not set in the worker's environment")
    service = apprise.Apprise()
    if not service.add(url):
        raise SendFailed(f"{url_env} does not hold a URL apprise understands")
    try:
        delivered = service.notify(title=subject, body=text)
    except Exception as exc:  # a plugin's own error: its text may carry the URL, so only the type
        raise SendFailed(f"apprise raised {type(exc).__name__}") from None
    if not delivered:
        raise SendFailed("the service refused it or was not reached (details in the worker log)")


def to_email(address: str, subject: str, text: str) -> None:
    try:
        send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, [address])
    except OSError as exc:
        raise SendFailed(f"mail not sent: {exc.strerror or type(exc).__name__}") from None
