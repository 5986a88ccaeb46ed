"""Notifications: what a project is told, where (its channels), who opted in, and what was delivered.

A notification is an outbox row written in the same transaction as the change it reports; a worker
delivers it after commit and records each target's answer, and beat re-drives what a dead worker or
an outage left undelivered. Messages carry names, states and failure classes, never a secret: a
chat channel's URL (which holds its token) lives in the deployment's environment, and the row holds
only the variable's name.
"""

from urllib.parse import urlsplit

from django.conf import settings
from django.db import models

from core.states import Transitions
from projects.models import Project


class Event(models.TextChoices):
    RUN_FINISHED = "run.finished", "Run finished (export sealed)"
    RUN_FAILED = "run.failed", "Run failed (with its failure class)"
    RUN_STALLED = "run.stalled", "Run stalled"
    RUN_UNREACHABLE = "run.unreachable", "Run's box unreachable"
    RUN_INTERRUPTED = "run.interrupted", "Run interrupted"
    RUN_CHECKPOINT = "run.checkpoint", "Run's durable checkpoint lags, or its resume is broken"
    TEARDOWN_REQUESTED = "teardown.requested", "Teardown requested"
    TEARDOWN_APPROVED = "teardown.approved", "Teardown approved"
    TEARDOWN_DONE = "teardown.done", "Teardown done"
    TEARDOWN_FAILED = "teardown.failed", "Teardown failed or needs a person"
    CLOCK = "clock.threshold", "Danger clock threshold"
    DRIFT = "drift.found", "Provider drift"
    SPEND = "spend.approval", "Run waits for a spend approval"
    RENT = "rent.approval", "A rent waits for an approver, or has a result"
    BUDGET = "budget.forecast", "Forecast at period end exceeds the budget"
    WASTE = "box.waste", "A box bills for nothing (idle, idle GPUs, verified, or stopped but billing)"


# A member who never chose is told of what destroys data or money; everything else is opt-in.
DEFAULT_EVENTS = [Event.CLOCK, Event.DRIFT, Event.TEARDOWN_FAILED, Event.BUDGET, Event.WASTE]
# What waits for an approver: its approvers are told whatever they chose (the one path approvers hear on).
DECIDED_BY_APPROVERS = {Event.TEARDOWN_REQUESTED, Event.SPEND, Event.RENT, Event.TEARDOWN_FAILED}


class NotifyVariableQuerySet(models.QuerySet):
    def granted_to(self, project):
        return self.filter(projects=project)


class NotifyVariable(models.Model):
    """A worker environment variable that holds a chat service's URL (and so its token), registered by
    an administrator and granted per project, as credentials are: an operator of one project once
    named another's variable and posted into its chat."""

    variable = models.CharField(
        max_length=64, unique=True, help_text="The variable's name on every worker, e.g. REMOTEGPU_NOTIFY_SLACK."
    )
    projects = models.ManyToManyField(Project, blank=True, related_name="notify_variables")
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    objects = NotifyVariableQuerySet.as_manager()

    class Meta:
        ordering = ["variable"]

    def __str__(self):
        return self.variable


class Channel(models.Model):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (JSON POST)"
        APPRISE = "apprise", "Chat service via apprise (Slack, Teams, Discord, Matrix, Telegram, …)"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="channels")
    name = models.CharField(max_length=80)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    url = models.URLField(blank=True, help_text="Webhook only: a public https URL.")
    url_env = models.CharField(
        max_length=64,
        blank=True,
        help_text="Apprise only: a registered notification variable granted to the project, holding the URL.",
    )
    events = models.JSONField(default=list, help_text="Event names; empty means every event.")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_channel_name_per_project")]

    def __str__(self):
        return f"{self.project} · {self.name}"

    def wants(self, event: str) -> bool:
        return self.enabled and (not self.events or event in self.events)

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def shown_url(self) -> str:
        """Where a webhook posts, as pages show it: a path or query may carry a token, so only the host."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}/…" if parts.path.strip("/") or parts.query else self.url


class Preference(models.Model):
    """One member's e-mail opt-in for one project (no row: DEFAULT_EVENTS)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_prefs")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notification_prefs")
    events = models.JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="one_preference_per_member")]

    def __str__(self):
        return f"{self.user_id} · {self.project_id}"


class Notification(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed (some target refused every attempt)"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notifications")
    event = models.CharField(max_length=24, choices=Event.choices)
    subject = models.CharField(max_length=200)
    text = models.TextField()
    data = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING, db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    results = models.JSONField(default=dict, help_text="Target label → 'sent' or why not.")

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"{self.event} · {self.subject}"


# A claim moves a pending row (or one a dead worker held) to sending; the deliverer ends it sent,
# failed after NOTIFY_MAX_ATTEMPTS, or pending again for beat to re-drive.
NOTIFICATION_TRANSITIONS = Transitions(
    Notification.State,
    {
        Notification.State.PENDING: {Notification.State.SENDING},
        Notification.State.SENDING: {
            Notification.State.SENDING,
            Notification.State.SENT,
            Notification.State.FAILED,
            Notification.State.PENDING,
        },
        Notification.State.SENT: set(),
        Notification.State.FAILED: set(),
    },
    "A notification",
)
