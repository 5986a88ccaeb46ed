"""Sweeps (one base run, many variants) and the spend requests a run makes past its approved budget, with
their transitions."""

from django.conf import settings
from django.db import models
from django.urls import reverse

from core.states import Transitions
from projects.models import Project
from runs.models.core import Run


class Sweep(models.Model):
    """A base run and a list of config overrides: each cell is its own run, write path and identities."""

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="sweeps")
    name = models.CharField(max_length=120)
    base_run = models.ForeignKey("Run", on_delete=models.PROTECT, related_name="+")
    overrides = models.JSONField(help_text="One mapping of config keys per cell")
    instances = models.ManyToManyField("profiles.Instance", related_name="sweeps")
    gpus_per_box = models.PositiveSmallIntegerField(default=1)
    independent = models.BooleanField(default=True, help_text="Cells may run in parallel on separate boxes/GPUs")
    array = models.JSONField(
        default=dict,
        blank=True,
        help_text="On a Slurm box: the cells go as one job array (wanted; the array's job once submitted)",
    )
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("sweep-detail", args=[self.pk])

    @property
    def array_job(self) -> str:
        return (self.array or {}).get("job", "")


class SpendStatus(models.TextChoices):
    PENDING = "pending", "Waiting for an approver"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired unanswered"
    CANCELLED = "cancelled", "Cancelled: the run changed"


# An approval holds until the attempt spends it; a change to the run cancels what it has not spent.
SPEND_TRANSITIONS = Transitions(
    SpendStatus,
    {
        SpendStatus.PENDING: {SpendStatus.APPROVED, SpendStatus.REJECTED, SpendStatus.EXPIRED, SpendStatus.CANCELLED},
        SpendStatus.APPROVED: {SpendStatus.CANCELLED},
        SpendStatus.REJECTED: set(),
        SpendStatus.EXPIRED: set(),
        SpendStatus.CANCELLED: set(),
    },
    "A spend request",
)


class SpendRequest(models.Model):
    """Spending is a cost action: one attempt of a run over the project's envelope or
    threshold waits here, in the approval queue; its requester never approves it."""

    class Why(models.TextChoices):
        LAUNCH = "launch", "Launch"
        SWEEP = "sweep", "Sweep cell"
        RELAUNCH = "relaunch", "Relaunch"
        OVERRUN = "overrun", "Running past its expected duration"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="spend_requests")
    attempt = models.PositiveIntegerField(help_text="The attempt this approval covers.")
    why = models.CharField(max_length=8, choices=Why.choices)
    expected_cost = models.DecimalField(max_digits=10, decimal_places=2)
    reason = models.TextField(help_text="What the envelope said: over what is left, or over the threshold.")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=10, choices=SpendStatus.choices, default=SpendStatus.PENDING)
    terms = models.JSONField(
        default=dict,
        blank=True,
        help_text="What was asked for and approved (box, its rate, expected minutes, cost): an approval "
        "covers an attempt only while the run still has these terms.",
    )
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    comment = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "attempt"], condition=models.Q(status="pending"), name="one_pending_spend_per_attempt"
            )
        ]

    def __str__(self):
        return f"spend #{self.pk} {self.run_id} attempt {self.attempt}"
