"""Projects: a team's line of work, who may see it, and the history of that access.

The bottom app: every other app may import it; it imports none of them.
"""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

# The idle-GPU alarm's settings, their bounds (delivery/waste.py reads them; runs/budgets.py sets them).
IDLE_BOUNDS = {"gpu_idle_percent": (0, 100), "gpu_idle_minutes": (1, 7 * 24 * 60)}


def member_filter(user, path: str) -> models.Q | None:
    """None: no restriction (an admin sees every project); otherwise membership of the project at path."""
    if user.is_superuser:
        return None
    return models.Q(**{f"{path}members": user})


class ProjectQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Members see their projects' history; admins see all; anonymous sees nothing."""
        if not user.is_authenticated:
            return self.none()
        rule = member_filter(user, "")
        return self if rule is None else self.filter(rule)

    def where_role(self, user, role: str):
        """The projects in which user holds role (an operator's instances, an approver's queue)."""
        if not user.is_authenticated or not user.is_active:
            return self.none()
        if user.is_superuser:
            return self
        return self.filter(memberships__user=user, **{f"memberships__{role}": True})


class Project(models.Model):
    name = models.CharField(max_length=80, unique=True)
    slug = models.SlugField(
        max_length=40,
        unique=True,
        help_text="Lowercase letters, digits and hyphens; used in node paths and instance names.",
    )
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    shutdown_needs_approval = models.BooleanField(
        default=False, help_text="Ask a second person even for a shutdown that keeps every disk (L2)."
    )
    # The cost envelope: a run whose expected cost exceeds what is left of it, or the
    # per-run threshold, waits for an approver before it starts (or relaunches).
    budget = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True, help_text="Spend allowed per period (USD); empty: none."
    )
    budget_period = models.CharField(
        max_length=5,
        choices=[("month", "per calendar month"), ("week", "per week (from Monday)")],
        default="month",
        db_default="month",  # rows written by code that predates the envelope (migrations, old workers)
    )
    require_data_identity = models.BooleanField(
        default=False,
        help_text="Every run launches with a registered dataset bound (its data identity), or not at all.",
    )
    run_cost_threshold = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Any run expected to cost more than this (USD) needs an approver; empty: none.",
    )
    gpu_idle_percent = models.PositiveSmallIntegerField(
        "idle GPU threshold (%)",
        default=10,
        db_default=10,
        validators=[MaxValueValidator(IDLE_BOUNDS["gpu_idle_percent"][1])],
        help_text="A live run whose every GPU stays under this utilisation is idle (0: never).",
    )
    gpu_idle_minutes = models.PositiveIntegerField(
        "idle GPU window (minutes)",
        default=30,
        db_default=30,
        validators=[
            MinValueValidator(IDLE_BOUNDS["gpu_idle_minutes"][0]),
            MaxValueValidator(IDLE_BOUNDS["gpu_idle_minutes"][1]),
        ],
        help_text="Idle this long raises a waste alarm with the run's $/h, then again at each later waste threshold.",
    )
    # A box that bills for nothing has its shutdown request filed in this person's name (they opted the
    # project in; another person approves it); empty: the alarm only offers the prefilled request.
    waste_shutdown_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="projects", through="Membership"
    )
    # The start of the budget period whose forecast overrun was last notified: once per period.
    forecast_warned_for = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        db_table = "runs_project"  # moved from runs: the table keeps its name
        ordering = ["name"]
        permissions = [
            ("operate", "May create instances and launch runs"),
            ("approve_cost", "May approve cost actions (shutdown, release, deletion)"),
        ]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("project-detail", args=[self.slug])


class Role(models.TextChoices):
    """What a member may do in one project; an admin may do everything everywhere."""

    OPERATOR = "operator", "operator"  # creates instances, launches, stops and requests teardowns
    APPROVER = "approver", "approver"  # approves cost actions and spend; never their own request


class MembershipQuerySet(models.QuerySet):
    def holding(self, role: str):
        return self.filter(**{role: True})


class Membership(models.Model):
    """A person's access to a project, and the roles they hold in it. The table is the one the plain
    many-to-many made: membership rows predate the roles they now carry."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    operator = models.BooleanField(default=False, db_default=False)
    approver = models.BooleanField(default=False, db_default=False)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        db_table = "runs_project_members"
        unique_together = [("project", "user")]

    def __str__(self):
        return f"{self.user_id} in {self.project_id}"

    def roles(self) -> set[str]:
        return {role for role in Role.values if getattr(self, role)}
