"""DELIVER's data: teardown requests (shut down, release, delete evidence, delete a resource), their
transitions, holds that block a release, and the alarms of boxes that bill for nothing.

The tables keep their custody_ names: the models moved out of the custody app, their rows did not.
"""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from core.states import Transitions
from custody.models import EvidenceLocation


class TeardownKind(models.TextChoices):
    SHUTDOWN = "shutdown", "Shut down"
    RELEASE = "release", "Release"
    DELETE_EVIDENCE = "delete_evidence", "Delete evidence"
    DELETE_RESOURCE = "delete_resource", "Delete resource"


class TeardownStatus(models.TextChoices):
    CHECKING = "checking", "Checking its proofs on the box"
    REFUSED = "refused", "Refused by its checks"
    PENDING = "pending", "Pending approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    EXECUTING = "executing", "Executing"
    AWAITING_ATTESTATION = "attest", "Awaiting console attestation"
    NEEDS_ATTENTION = "attention", "Needs a person"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# The only legal moves (a request filed by a person starts checking; one asked with its proofs in hand
# starts pending, or approved when no second person is needed).
# needs-attention: an execution whose worker vanished mid-call; only a person may decide whether
# it happened (done) or may run again with the same idempotency key (approved).
TEARDOWN_TRANSITIONS = Transitions(
    TeardownStatus,
    {
        # Filed by a person; a task gathers the deep proofs (idle scan, re-hash) outside any lock, then
        # they are checked again under it: on to pending (or approved), or refused with the reason.
        TeardownStatus.CHECKING: {
            TeardownStatus.PENDING,
            TeardownStatus.REFUSED,
            TeardownStatus.CANCELLED,
        },
        TeardownStatus.PENDING: {
            TeardownStatus.APPROVED,
            TeardownStatus.REJECTED,
            TeardownStatus.EXPIRED,
            TeardownStatus.CANCELLED,
        },
        # Approved but never taken by a worker (its enqueue was lost): re-driven, then failed; either way a
        # person may cancel it, so no approval stays in flight forever.
        TeardownStatus.APPROVED: {TeardownStatus.EXECUTING, TeardownStatus.FAILED, TeardownStatus.CANCELLED},
        TeardownStatus.EXECUTING: {
            TeardownStatus.DONE,
            TeardownStatus.FAILED,
            TeardownStatus.AWAITING_ATTESTATION,
            TeardownStatus.NEEDS_ATTENTION,
        },
        TeardownStatus.AWAITING_ATTESTATION: {TeardownStatus.EXECUTING},
        TeardownStatus.NEEDS_ATTENTION: {TeardownStatus.DONE, TeardownStatus.APPROVED},
        TeardownStatus.FAILED: {TeardownStatus.APPROVED, TeardownStatus.CANCELLED},
        TeardownStatus.REJECTED: set(),
        TeardownStatus.REFUSED: set(),
        TeardownStatus.EXPIRED: set(),
        # A release done by API whose box the provider lists again soon after: still billing, for a person.
        TeardownStatus.DONE: {TeardownStatus.NEEDS_ATTENTION},
        TeardownStatus.CANCELLED: set(),
    },
    "A teardown request",
)


OPEN_TEARDOWN = [
    TeardownStatus.CHECKING,
    TeardownStatus.PENDING,
    TeardownStatus.APPROVED,
    TeardownStatus.EXECUTING,
    TeardownStatus.AWAITING_ATTESTATION,
    TeardownStatus.NEEDS_ATTENTION,
]


class TeardownRequestQuerySet(models.QuerySet):
    def pending(self):
        return self.filter(status=TeardownStatus.PENDING)

    def needs_person(self):
        """Executions whose outcome nobody knows (a worker vanished mid-call, a provider still listing a
        released box): an approver must say what happened."""
        return self.filter(status=TeardownStatus.NEEDS_ATTENTION)

    def visible_to(self, user):
        """Requests on the boxes of the projects the user sees (admins: all)."""
        from fleet.models import Instance

        return self.filter(instance__in=Instance.objects.visible_to(user))


class TeardownRequest(models.Model):
    """One consequence (shut down, release, delete evidence), its checks, approval and execution."""

    instance = models.ForeignKey("profiles.Instance", on_delete=models.PROTECT, related_name="teardown_requests")
    kind = models.CharField(max_length=16, choices=TeardownKind.choices)
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    location = models.CharField(max_length=8, choices=EvidenceLocation.choices, blank=True)
    resource = models.ForeignKey(
        "profiles.Resource", null=True, blank=True, on_delete=models.PROTECT, related_name="teardown_requests"
    )
    level = models.CharField(max_length=2)
    needs_second_person = models.BooleanField(default=True)
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    status = models.CharField(max_length=10, choices=TeardownStatus.choices, default=TeardownStatus.PENDING)
    check_at_request = models.JSONField(default=dict)
    check_at_execution = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    waive_active = models.BooleanField(default=False, help_text="An L3 approver waived unclosed active/ dirs")
    retire_hold = models.BooleanField(default=False, help_text="This release retires the instance's hold")
    idempotency_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    redrives = models.PositiveSmallIntegerField(default=0, help_text="Times beat re-enqueued it (checking or approved)")
    redriven_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A filed request's proofs: when a task began gathering them, and how long they took on this box
    # (what the next request's deadline on the same box follows).
    proof_started_at = models.DateTimeField(null=True, blank=True)
    proof_seconds = models.FloatField(null=True, blank=True)
    provider_answer = models.JSONField(default=dict, blank=True)
    failure = models.TextField(blank=True)
    attested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    offline_verified = models.BooleanField(null=True)
    # Evidence deletions a person filed together from one selection of a box's exports: each is its own
    # request (checked, approved and executed on its own); the pages show them and decide them as one.
    batch = models.UUIDField(null=True, blank=True, db_index=True)

    objects = TeardownRequestQuerySet.as_manager()

    class Meta:
        db_table = "custody_teardownrequest"
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"{self.get_kind_display()} {self.instance_id} ({self.status})"

    def get_absolute_url(self):
        return reverse("teardown-detail", args=[self.pk])

    @property
    def target(self) -> str:
        if self.kind == TeardownKind.DELETE_EVIDENCE:
            return f"{self.get_location_display()} of {self.run.run_id}"
        if self.kind == TeardownKind.DELETE_RESOURCE:
            return f"{self.resource} of {self.instance.name}"
        return self.instance.name


class ReleaseHold(models.Model):
    """ "Never release": blocks release requests until an L3-approved release retires it (recorded)."""

    instance = models.ForeignKey("profiles.Instance", on_delete=models.PROTECT, related_name="holds")
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    retired_reason = models.TextField(blank=True)
    retired_by_request = models.ForeignKey(TeardownRequest, null=True, blank=True, on_delete=models.PROTECT)

    class Meta:
        db_table = "custody_releasehold"
        ordering = ["-created"]

    def __str__(self):
        return f"hold on {self.instance_id}"


class WasteKind(models.TextChoices):
    VERIFIED = "verified", "Every run on it is exported and verified, and it still bills"
    IDLE = "idle", "Running with no live run"
    STOPPED = "stopped", "Stopped on a platform whose stop keeps billing"
    RESOURCES = "resources", "Released, and its volumes, IPs or snapshots still bill"
    GPU_IDLE = "gpu_idle", "A live run's GPUs sit idle"


class WasteAlarm(models.Model):
    """One notification that a box bills for nothing: raised once per episode (its kind and the moment
    the waste began) and threshold, so beat ticks never repeat it. The teardown it suggests is
    `suggested`; a project that opted in has the shutdown request filed (`request`)."""

    instance = models.ForeignKey("profiles.Instance", on_delete=models.CASCADE, related_name="waste_alarms")
    kind = models.CharField(max_length=10, choices=WasteKind.choices)
    since = models.DateTimeField(help_text="When the box began to bill for nothing")
    threshold_minutes = models.PositiveIntegerField()
    hourly = models.DecimalField(max_digits=10, decimal_places=4)
    accrued = models.DecimalField(max_digits=12, decimal_places=2, help_text="Billed since `since`, when raised")
    suggested = models.CharField(max_length=20, help_text="The teardown kind the alarm offers")
    message = models.TextField()
    request = models.ForeignKey(TeardownRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    raised_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "custody_wastealarm"
        ordering = ["-raised_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "kind", "since", "threshold_minutes"], name="one_waste_alarm_per_threshold"
            )
        ]

    def __str__(self):
        return (
            f"{self.kind} waste on {self.instance_id} since {self.since:%Y-%m-%d %H:%M} ({self.threshold_minutes} min)"
        )
