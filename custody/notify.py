"""Tell approvers a request waits: e-mail through Django's backend, and the project's webhook if set."""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q

from custody.models import TeardownRequest
from notifications import webhooks

log = logging.getLogger(__name__)


def summary(request: TeardownRequest) -> dict:
    return {
        "request": request.pk,
        "kind": request.kind,
        "level": request.level,
        "instance": request.instance.name,
        "platform": request.instance.profile.name,
        "target": request.target,
        "requester": request.requester.get_username(),
        "reason": request.reason,
        "expires_at": request.expires_at.isoformat(),
    }


def approver_emails(project) -> list[str]:
    """Who decides for project: its approvers and the admins (an approver of another project is not told)."""
    users = get_user_model().objects.filter(is_active=True).exclude(email="")
    users = users.filter(Q(memberships__project=project, memberships__approver=True) | Q(is_superuser=True))
    return sorted(set(users.values_list("email", flat=True)))


def approvers_of(request_id: int) -> None:
    """Best effort: a mail server or webhook outage must not undo a committed request."""
    from custody.tasks import post_webhook

    request = TeardownRequest.objects.select_related("instance__project", "requester").get(pk=request_id)
    data = summary(request)
    recipients = [email for email in approver_emails(request.instance.project) if email != request.requester.email]
    if recipients:
        subject = f"[RemoteGPU] {request.level} {request.get_kind_display()} of {request.target} awaits approval"
        body = "\n".join(f"{key}: {value}" for key, value in data.items())
        try:
            send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
        except OSError as exc:
            log.warning("approval mail for request %s not sent: %s", request_id, exc)
    if request.instance.project.approval_webhook:
        post_webhook.delay(request.instance.project.approval_webhook, data)


def post(url: str, data: dict) -> int:
    """POST to the project's webhook; WebhookRefused when it points where the deployment forbids."""
    return webhooks.post_json(url, {"event": "teardown.requested", **data})
