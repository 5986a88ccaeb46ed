"""A rent: a box created at a provider for a project, as a cost action. A person asks by constraint (GPU
model and count, memory, disk, max $/h, candidate providers in order); another person approves the
spend; a worker asks each candidate in turn and creates onto the first fitting offer, named by the naming
rule; it polls until the box runs, registers it and scans its host key for a person to confirm.
"""

import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse

from core.states import Transitions


class RentalState(models.TextChoices):
    PROVING = "proving", "Proving its run where no GPU bills"
    REQUESTED = "requested", "Waiting for an approver"
    APPROVED = "approved", "Approved: creating soon"
    CREATING = "creating", "Asking the candidates"
    BOOTING = "booting", "Created: waiting for it to run"
    REGISTERED = "registered", "Registered: confirm its host key"
    READY = "ready", "Ready"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired unanswered"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"


# A rent moves forward once; every state that waits on a task has a deadline (rentals/reconcile.py).
# A rent asked for a run proves that run first (rentals/proving.py): a failed proof creates nothing.
RENTAL_TRANSITIONS = Transitions(
    RentalState,
    {
        RentalState.PROVING: {RentalState.REQUESTED, RentalState.FAILED, RentalState.CANCELLED},
        RentalState.REQUESTED: {
            RentalState.PROVING,  # its run changed since its proof: proven again before anyone approves it
            RentalState.APPROVED,
            RentalState.REJECTED,
            RentalState.EXPIRED,
            RentalState.CANCELLED,
        },
        RentalState.APPROVED: {RentalState.CREATING, RentalState.FAILED},
        RentalState.CREATING: {RentalState.BOOTING, RentalState.FAILED},
        RentalState.BOOTING: {RentalState.REGISTERED, RentalState.FAILED},
        RentalState.REGISTERED: {RentalState.READY},
        RentalState.READY: set(),
        RentalState.REJECTED: set(),
        RentalState.EXPIRED: set(),
        RentalState.CANCELLED: set(),
        RentalState.FAILED: set(),
    },
    "A rent",
)
OPEN_STATES = {RentalState.APPROVED, RentalState.CREATING, RentalState.BOOTING}


class RentalQuerySet(models.QuerySet):
    def visible_to(self, user):
        from projects.models import Project

        return self.filter(project__in=Project.objects.visible_to(user))

    def in_flight(self):
        """Asked and not yet ready or ended: waiting for an approver, a worker, or a host key."""
        waiting = [RentalState.PROVING, RentalState.REQUESTED, *OPEN_STATES, RentalState.REGISTERED]
        return self.filter(state__in=waiting)


class Rental(models.Model):
    project = models.ForeignKey("projects.Project", on_delete=models.PROTECT, related_name="rentals")
    purpose = models.SlugField(max_length=40, help_text="The middle of the box's name: <project>-<purpose>-<date>.")
    gpu_models = models.JSONField(help_text="Any of these GPU models (the catalogue's spelling).")
    gpu_count = models.PositiveSmallIntegerField(default=1)
    gpu_memory_gb = models.PositiveIntegerField("GPU memory (GB, at least)", default=0)
    disk_gb = models.PositiveIntegerField("disk (GB)", default=50)
    max_rate = models.DecimalField("max $/h", max_digits=8, decimal_places=4)
    candidates = models.JSONField(help_text="Provider keys, in the order they are asked.")
    api_credentials = models.JSONField(help_text="{provider: credential id}: the API key each candidate is asked with.")
    ssh_credential = models.ForeignKey(
        "profiles.Credential",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The SSH key the box is reached with.",
    )
    ssh_user = models.CharField(max_length=64, blank=True, help_text="Blank: the platform's documented user.")
    image = models.CharField(max_length=200, default="pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime")
    expected_minutes = models.PositiveIntegerField()
    expected_cost = models.DecimalField(max_digits=10, decimal_places=2, help_text="max $/h × expected minutes")
    spend_note = models.TextField(blank=True, help_text="What the project's spend rules said when it was asked.")
    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="A draft run that continues into its preflight on the new box once its host key is confirmed.",
    )
    proving_box = models.ForeignKey(
        "profiles.Instance",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Where the run's input checks and CPU smoke pass before anything is rented (no GPU bills there).",
    )
    proof = models.JSONField(
        default=dict, blank=True, help_text="What the proof on the proving box showed, and what it cost."
    )
    region = models.CharField(
        max_length=40, blank=True, help_text="Only offers in this region (blank: any); the box records its own."
    )
    durable_volume = models.CharField(
        max_length=100,
        blank=True,
        help_text="A provider volume or filesystem attached at create for the durable tier (RunPod, Lambda).",
    )
    volume_gb = models.PositiveIntegerField(
        "create it (GB)",
        default=0,
        help_text="With a volume named: create it this large in the rent's region where none of its name is listed "
        "(0: attach one that exists).",
    )
    volume = models.JSONField(
        default=dict,
        blank=True,
        help_text="The volume as its provider lists it, found or created before the box: {id, name, kind, rate}.",
    )
    state = models.CharField(max_length=12, choices=RentalState.choices, default=RentalState.REQUESTED)
    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="The idempotency key.")
    name = models.CharField(max_length=100, help_text="The provider-side name (and the instance's).")
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    comment = models.TextField(blank=True)
    provider = models.CharField(max_length=40, blank=True)
    provider_id = models.CharField(max_length=100, blank=True)
    offer = models.JSONField(default=dict, blank=True, help_text="The offer it was created onto.")
    instance = models.ForeignKey(
        "profiles.Instance", null=True, blank=True, on_delete=models.PROTECT, related_name="rentals"
    )
    reason = models.TextField(blank=True, help_text="Why it failed, and what to do next.")
    redrives = models.PositiveSmallIntegerField(default=0)
    claimed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a worker last claimed it or made progress: one worker creates at a time."
    )
    created = models.DateTimeField(auto_now_add=True)
    changed_at = models.DateTimeField(
        auto_now_add=True, help_text="When it last moved (its deadline counts from here)."
    )
    expires_at = models.DateTimeField()

    objects = RentalQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"rent #{self.pk} {self.name}"

    def get_absolute_url(self):
        return reverse("rental-detail", args=[self.pk])

    @property
    def image_digest(self) -> str:
        """The digest the image is pinned by; "" for a tag (its environment may change under the name)."""
        return self.image.partition("@")[2]


class RentalAttempt(models.Model):
    """One candidate asked: sent is written before the create call, so a worker killed after it knows the
    box may exist and looks for it by name instead of creating again."""

    class Outcome(models.TextChoices):
        SENT = "sent", "Create sent"
        CREATED = "created", "Created"
        NO_OFFER = "no_offer", "No fitting offer"
        NO_CAPACITY = "no_capacity", "No capacity"
        ERROR = "error", "Provider error"

    rental = models.ForeignKey(Rental, on_delete=models.CASCADE, related_name="attempts")
    provider = models.CharField(max_length=40)
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    offer = models.JSONField(default=dict, blank=True)
    provider_id = models.CharField(max_length=100, blank=True)
    detail = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.provider} {self.outcome}"
