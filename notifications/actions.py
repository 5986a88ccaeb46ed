"""State changes of notifications: announce (in the caller's transaction), deliver, configure."""

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.audit import record
from core.enqueue import after_commit
from core.models import AuditAction
from notifications import send, webhooks
from notifications.models import (
    DECIDED_BY_APPROVERS,
    DEFAULT_EVENTS,
    Channel,
    Event,
    Notification,
    NotifyVariable,
    Preference,
)
from projects.grants import grant_changes


def do_notify(project_id: int, event: str, subject: str, text: str, data: dict | None = None) -> Notification:
    """Written with the change it reports (inside its transaction); delivered after that commits."""

    notification = Notification.objects.create(
        project_id=project_id,
        event=Event(event),
        subject=f"[RemoteGPU] {subject}"[:200],
        text=text,
        data={"event": event, **(data or {})},
    )
    after_commit("notifications.tasks.deliver_notification", notification.pk)
    return notification


def recipients(notification: Notification) -> list[str]:
    """Members with an e-mail who opted in to this event (or never chose, for the default events); and
    for what waits for an approver (`awaits_approval`), the project's approvers and the admins
    whatever they chose, never the person who asked (`asked_by`)."""
    project = notification.project
    chosen = {pref.user_id: pref.events for pref in Preference.objects.filter(project=project)}
    found = []
    for user in project.members.filter(is_active=True).exclude(email="").order_by("pk"):
        if notification.event in chosen.get(user.pk, DEFAULT_EVENTS):
            found.append(user.email)
    if notification.event in DECIDED_BY_APPROVERS and notification.data.get("awaits_approval"):
        deciders = get_user_model().objects.filter(is_active=True).exclude(email="")
        deciders = deciders.filter(Q(memberships__project=project, memberships__approver=True) | Q(is_superuser=True))
        found += deciders.exclude(pk=notification.data.get("asked_by")).values_list("email", flat=True)
    return sorted(set(found))


def _targets(notification: Notification) -> dict:
    """Label → a callable that sends the notification there."""
    payload = {**notification.data, "subject": notification.subject, "text": notification.text}
    targets = {}
    for channel in Channel.objects.filter(project=notification.project, enabled=True):
        if not channel.wants(notification.event):
            continue
        if channel.kind == Channel.Kind.WEBHOOK:
            targets[channel.label] = partial(send.to_webhook, channel.url, payload)
        else:
            targets[channel.label] = partial(
                send.to_apprise, channel.url_env, channel.project_id, notification.subject, notification.text
            )
    for address in recipients(notification):
        targets[f"email:{address}"] = partial(send.to_email, address, notification.subject, notification.text)
    return targets


def _claim(notification_id: int) -> bool:
    """One deliverer at a time; a claim older than NOTIFY_CLAIM_SECONDS belonged to a dead worker."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.NOTIFY_CLAIM_SECONDS)
    return bool(
        Notification.objects.filter(pk=notification_id)
        .filter(Q(state=Notification.State.PENDING) | Q(state=Notification.State.SENDING, claimed_at__lt=stale))
        .update(state=Notification.State.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    )


def do_deliver_notification(notification_id: int) -> str | None:
    """Send to every target not yet reached; the state it ends in (None: someone else holds it)."""
    if not _claim(notification_id):
        return None
    notification = Notification.objects.select_related("project").get(pk=notification_id)
    results = dict(notification.results)
    for label, deliver in _targets(notification).items():
        if results.get(label) == "sent":
            continue  # a retry never sends twice to a target that took it
        try:
            deliver()
            results[label] = "sent"
        except send.SendFailed as exc:
            results[label] = f"failed: {exc}"[:300]
    if all(value == "sent" for value in results.values()):
        state = Notification.State.SENT
    elif notification.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
        state = Notification.State.FAILED
    else:
        state = Notification.State.PENDING  # beat re-drives it (notifications.tasks.redeliver)
    Notification.objects.filter(pk=notification_id, state=Notification.State.SENDING).update(
        state=state, results=results
    )
    return state


def undelivered(now=None):
    """Pending past a short wait, or claimed by a worker that never finished."""
    now = now or timezone.now()
    return Notification.objects.filter(
        Q(state=Notification.State.PENDING, created__lt=now - timedelta(seconds=settings.NOTIFY_RETRY_SECONDS))
        | Q(state=Notification.State.SENDING, claimed_at__lt=now - timedelta(seconds=settings.NOTIFY_CLAIM_SECONDS))
    )


def _events(events) -> list[str]:
    unknown = sorted(set(events) - set(Event.values))
    if unknown:
        raise ValidationError(f"Unknown event(s): {', '.join(unknown)}.")
    return [event for event in Event.values if event in events]


def do_add_channel(project, name: str, kind: str, target: str, events, *, actor) -> Channel:
    """A webhook names a public https URL; an apprise channel names the variable that holds its URL."""
    name, target = name.strip(), target.strip()
    if not name:
        raise ValidationError("Name the channel.")
    channel = Channel(project=project, name=name, kind=kind, events=_events(events), created_by=actor)
    if kind == Channel.Kind.WEBHOOK:
        problem = webhooks.url_problem(target) if target else "A webhook channel needs its URL."
        channel.url = target
    elif kind == Channel.Kind.APPRISE:
        problem = send.env_name_problem(target) or send.grant_problem(project.pk, target)
        channel.url_env = target
    else:
        problem = f"Unknown kind {kind!r}."
    if problem:
        raise ValidationError(problem)
    try:
        with transaction.atomic():
            channel.save()
    except IntegrityError:
        raise ValidationError(f"This project already has a channel named “{name}”.") from None
    return channel


def do_remove_channel(channel_id: int, *, actor) -> None:
    Channel.objects.filter(pk=channel_id).delete()


def do_set_preference(project, user, events, *, actor) -> Preference:
    preference, _ = Preference.objects.update_or_create(
        user=user, project=project, defaults={"events": _events(events)}
    )
    return preference


def events_of(project, user) -> list[str]:
    preference = Preference.objects.filter(project=project, user=user).first()
    return preference.events if preference else list(DEFAULT_EVENTS)


def do_save_notify_variable(variable: NotifyVariable, projects, *, actor) -> NotifyVariable:
    """An administrator registers a notification variable or changes its grants; audited.
    A revoked grant stops the project's next message through it (checked at send)."""
    problem = send.env_name_problem(variable.variable)
    if problem:
        raise ValidationError(problem)
    with transaction.atomic(durable=True):
        before = NotifyVariable.objects.select_for_update().get(pk=variable.pk) if variable.pk else None
        old = set(before.projects.values_list("slug", flat=True)) if before else set()
        variable.created_by = before.created_by if before else actor
        variable.save()
        variable.projects.set(projects)
        new = {project.slug for project in projects}
        granted, revoked, parts = grant_changes(old, new, registered=before is None)
        message = f"{variable.variable}: {'; '.join(parts)}"
        data = {"variable": variable.variable, "granted": granted, "revoked": revoked}
        record(AuditAction.VARIABLE_CHANGED, message, actor=actor, **data)
    return variable
