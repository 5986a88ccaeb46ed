"""Instances (one concrete GPU box), their history, probes, and platform acknowledgements."""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.urls import reverse

from core.states import Transitions
from node.transport import HostKey
from platforms.catalog import get_profile
from platforms.hooks import effective as effective_hooks
from platforms.resources import FACTS as RESOURCE_FACTS


class InstanceState(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    RUNNING = "running", "Running"
    STOPPED = "stopped", "Stopped"
    RELEASED = "released", "Released"


# A box that may be on (nobody knows it is off): its platform timers tick, a provider's "stopped" moves it.
MAY_BE_ON = (InstanceState.RUNNING, InstanceState.UNKNOWN)

# Released is terminal: a released box is gone; a new box is a new instance.
INSTANCE_TRANSITIONS = Transitions(
    InstanceState,
    {
        InstanceState.UNKNOWN: {InstanceState.RUNNING, InstanceState.STOPPED, InstanceState.RELEASED},
        InstanceState.RUNNING: {InstanceState.STOPPED, InstanceState.RELEASED, InstanceState.UNKNOWN},
        InstanceState.STOPPED: {InstanceState.RUNNING, InstanceState.RELEASED, InstanceState.UNKNOWN},
        # Released here, listed again by its provider soon after (delivery.actions.attention.do_reopen_release).
        InstanceState.RELEASED: {InstanceState.UNKNOWN},
    },
    "An instance",
)


class CredentialKind(models.TextChoices):
    SSH_KEY = "ssh-key", "SSH private key"
    PROVIDER_KEY = "provider-key", "Provider API key"
    RUN_SECRET = "run-secret", "Run secret"


class CredentialQuerySet(models.QuerySet):
    def of_kind(self, kind):
        return self.filter(kind=kind)

    def usable_by(self, user):
        """Credentials granted to at least one project the user operates in (admins: all): an
        operator registers boxes with them; a member without the role names none."""
        from projects.models import Project, Role

        if user.is_superuser:
            return self
        return self.filter(projects__in=Project.objects.where_role(user, Role.OPERATOR)).distinct()


class Credential(models.Model):
    """A secret registered by an administrator, by where it lives on the workers; never its value.

    An instance picks one of the credentials granted to its project, so an operator can name only
    what an administrator put there for them: no free-form env:NAME or key path.
    """

    name = models.SlugField(max_length=60, unique=True)
    kind = models.CharField(max_length=20, choices=CredentialKind.choices)
    reference = models.CharField(
        "where on the workers",
        max_length=300,
        help_text="env:NAME (a variable set on every worker) or the absolute path of a key file on the "
        "workers. Never the secret itself.",
    )
    projects = models.ManyToManyField("projects.Project", blank=True, related_name="credentials")
    export_as = models.CharField(
        "exported as",
        max_length=64,
        blank=True,
        help_text="Run secrets: the variable the training command sees (e.g. WANDB_API_KEY); empty: the "
        "variable named by env:NAME.",
    )
    note = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    objects = CredentialQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("credential-edit", args=[self.pk])

    def granted_to(self, project_id: int) -> bool:
        return self.projects.filter(pk=project_id).exists()


class InstanceQuerySet(models.QuerySet):
    def visible_to(self, user):
        from projects.models import member_filter

        if not user.is_authenticated:
            return self.none()
        rule = member_filter(user, "project__")
        return self if rule is None else self.filter(rule)

    def with_state_events(self):
        """Prefetch each instance's state history once (cost and clocks read it)."""
        state_events = InstanceEvent.objects.filter(kind=InstanceEvent.Kind.STATE).order_by("at", "id")
        return self.prefetch_related(models.Prefetch("events", queryset=state_events, to_attr="state_events"))

    def billing(self):
        return self.exclude(state=InstanceState.RELEASED)


class Instance(models.Model):
    name = models.CharField(max_length=100, unique=True)
    project = models.ForeignKey("projects.Project", on_delete=models.PROTECT, related_name="instances")
    profile_key = models.CharField("platform", max_length=40)
    host = models.CharField(max_length=253, blank=True)
    port = models.PositiveIntegerField(default=22)
    user = models.CharField(max_length=64, blank=True)
    credential = models.ForeignKey(
        Credential,
        verbose_name="SSH key",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="ssh_instances",
        help_text="One of the SSH keys an administrator granted to this project.",
    )
    gpu_description = models.CharField("GPU", max_length=120, blank=True)
    data_root_override = models.CharField(
        "data root",
        max_length=300,
        blank=True,
        help_text="Where runs work on this box; blank = the platform's data root.",
    )
    mirror_root = models.CharField(
        "durable mirror root",
        max_length=300,
        blank=True,
        help_text="A durable disk on this box for sealed-export mirrors; blank = the platform's durable tier.",
    )
    region = models.CharField(
        max_length=60,
        blank=True,
        help_text="The provider's region or data centre of the box (a rent records its offer's); blank: unknown.",
    )
    durable_volume = models.CharField(
        max_length=120,
        blank=True,
        help_text="The provider volume or filesystem at the durable root (its id or name); blank: the box's own.",
    )
    image = models.CharField(
        max_length=200,
        blank=True,
        help_text="The image the box was created from (a rent's, as sent: best a digest); blank: not known.",
    )
    data_tier = models.CharField(
        "tier of the data root",
        max_length=60,
        blank=True,
        help_text="Which of the platform's storage tiers the data root is on; blank = by its path (worst case).",
    )
    data_mounts = models.JSONField(
        default=dict,
        blank=True,
        help_text="The data root's mount (and the declared tier's) as the box's last preflight measured them",
    )
    mirror_tier = models.CharField(
        "tier of the mirror root",
        max_length=60,
        blank=True,
        help_text="Which storage tier the durable mirror root is on; blank = by its path (worst case).",
    )
    provider_id = models.CharField(
        "provider's instance id", max_length=100, blank=True, help_text="Pod / instance / machine id at the provider"
    )
    api_credential = models.ForeignKey(
        Credential,
        verbose_name="provider API key",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="api_instances",
        help_text="One of the provider API keys an administrator granted to this project.",
    )
    shutdown_command = models.CharField(
        max_length=300,
        blank=True,
        help_text="The command that powers this box off over SSH (required where that is a real machine: "
        "generic SSH boxes). Nothing is run by default.",
    )
    rate_running = models.DecimalField("hourly rate running", max_digits=10, decimal_places=4, default=0)
    rate_stopped = models.DecimalField("hourly rate stopped (storage)", max_digits=10, decimal_places=4, default=0)
    stops_at = models.DateTimeField(
        "platform timer (UTC)",
        null=True,
        blank=True,
        help_text="When a timer of the platform stops or ends this box: auto-shutdown, rental end, notebook cap.",
    )
    hooks = models.JSONField(
        "hook overrides",
        default=dict,
        blank=True,
        help_text="Overrides of the platform's hooks for this box: proxy, env, interpreter (platforms/hooks.py).",
    )
    state = models.CharField(max_length=16, choices=InstanceState.choices, default=InstanceState.UNKNOWN)
    provider_down = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the provider last said when it said the box is not running (stopped, gone) and since "
        "when: a run still running there lost its box; cleared when the provider says it runs",
    )
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # The pinned host key; empty until a person confirms the fingerprint seen on first contact.
    host_key_type = models.CharField(max_length=40, blank=True)
    host_key_base64 = models.TextField(blank=True)
    host_key_confirmed_at = models.DateTimeField(null=True, blank=True)
    host_key_confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The key a probe saw last while none was pinned, waiting for confirmation.
    seen_key_type = models.CharField(max_length=40, blank=True)
    seen_key_base64 = models.TextField(blank=True)

    objects = InstanceQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        constraints = [
            # One live box per provider resource: its checks, approvals and provider calls are that box's.
            models.UniqueConstraint(
                fields=["profile_key", "provider_id"],
                condition=~models.Q(provider_id="") & ~models.Q(state="released"),
                name="one_live_instance_per_provider_resource",
            )
        ]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("instance-detail", args=[self.pk])

    @property
    def profile(self):
        return get_profile(self.profile_key)

    @property
    def data_root(self) -> str:
        return self.data_root_override or self.profile.data_root

    @property
    def hot_root(self) -> str:
        """The platform's fast local disk for the project's cache and staged datasets ("" = the data root)."""
        return self.profile.data["storage"].get("hot_root") or ""

    @property
    def effective_hooks(self) -> dict:
        """The platform's hooks with this box's overrides over them."""
        return effective_hooks(self.profile.hooks, self.hooks or {})

    @property
    def data_tier_info(self) -> dict:
        """The tier the data root's path (or its declaration) names: where to look, not what survives."""
        return self.profile.tier_of(self.data_root, self.data_tier)

    @property
    def measured_data_tier(self) -> dict:
        """The tier the data root is on as the box last measured it (its mount: device, mount point, fs
        type), which every money and evidence decision reads (DOMAIN §7): a tier that is a disk of its own
        counts only where it was measured mounted; nothing measured is the least-surviving reading."""
        return self.profile.measured_tier(self.data_root, self.data_mounts or None, self.data_tier)

    @property
    def mirror_tier_info(self) -> dict:
        return self.profile.tier_of(self.mirror_root or self.profile.durable_root or "", self.mirror_tier)

    @property
    def pinned_host_key(self) -> HostKey | None:
        return HostKey(self.host_key_type, self.host_key_base64) if self.host_key_base64 else None

    @property
    def seen_host_key(self) -> HostKey | None:
        return HostKey(self.seen_key_type, self.seen_key_base64) if self.seen_key_base64 else None

    @property
    def address(self) -> str:
        return "this machine" if self.profile.is_local else f"{self.user}@{self.host}:{self.port}"


class InstanceEvent(models.Model):
    class Kind(models.TextChoices):
        CREATED = "created"
        STATE = "state"
        PROBE = "probe"
        HOST_KEY = "host_key"
        NOTE = "note"
        CLOCK = "clock"
        WASTE = "waste"

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.instance_id} {self.kind}: {self.message[:60]}"


class InstanceProbe(models.Model):
    class Kind(models.TextChoices):
        LIGHT = "light", "Connection test"
        AUDIT = "audit", "Environment audit"

    class Trigger(models.TextChoices):
        BUTTON = "button"
        SCHEDULE = "schedule"

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="probes")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.BUTTON)
    reachable = models.BooleanField()
    ok = models.BooleanField()
    error = models.TextField(blank=True)
    raw = models.TextField(blank=True)
    parsed = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.get_kind_display()} of {self.instance_id} at {self.at:%Y-%m-%d %H:%M}"


class PlatformAcknowledgement(models.Model):
    """A person read a platform's conveniences and danger clocks for a project (first contact)."""

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="acknowledgements")
    profile_key = models.CharField(max_length=40)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "profile_key"], name="one_acknowledgement_per_platform")
        ]

    def __str__(self):
        return f"{self.user} acknowledged {self.profile_key} for {self.project_id}"


class Resource(models.Model):
    """A billable resource beyond the instance (a network volume, a filesystem, a static IP, a
    snapshot): its own rate, its own clock, and its own L3 consequence (deleting it)."""

    KINDS = [(kind, facts.label) for kind, facts in RESOURCE_FACTS.items()]

    instance = models.ForeignKey(Instance, on_delete=models.PROTECT, related_name="resources")
    kind = models.CharField(max_length=16, choices=KINDS)
    name = models.CharField(max_length=80)
    provider_id = models.CharField(max_length=120, blank=True, help_text="The provider's id for it, if it has one.")
    tier = models.CharField(max_length=80, blank=True, help_text="The storage tier of the box it backs (its files).")
    rate = models.DecimalField("hourly rate", max_digits=10, decimal_places=4, default=0)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["instance", "name"]
        constraints = [models.UniqueConstraint(fields=["instance", "name"], name="one_resource_name_per_box")]

    def __str__(self):
        return f"{self.get_kind_display()} {self.name}"

    @property
    def facts(self):
        return RESOURCE_FACTS[self.kind]

    @property
    def project(self):
        return self.instance.project

    def cost_between(self, start, end):
        """What it billed inside [start, end]: it bills from registration until it is deleted."""
        until = min(end, self.deleted_at) if self.deleted_at else end
        seconds = (until - max(start, self.created)).total_seconds()
        return self.rate * Decimal(str(max(seconds, 0) / 3600))


class ClockAlarm(models.Model):
    """One notification that a danger clock of a box is close to firing (or has fired): raised once per
    clock, firing time and threshold, so beat ticks never repeat it; a new stop is a new firing time."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="clock_alarms")
    clock = models.CharField(max_length=40)
    what = models.TextField()
    fires_at = models.DateTimeField()
    threshold_hours = models.PositiveIntegerField(help_text="0: the clock has fired")
    raised_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "custody_clockalarm"  # moved from custody beside the boxes: its rows stay
        ordering = ["fires_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "clock", "fires_at", "threshold_hours"], name="one_alarm_per_threshold"
            )
        ]

    def __str__(self):
        return f"{self.clock} of {self.instance_id} at {self.fires_at:%Y-%m-%d %H:%M} ({self.threshold_hours} h)"
