"""A project's datasets: a roster (path, bytes, SHA-256 per file) and where the bytes come from.

The roster's SHA-256 is the dataset's identity, and a run's data identity; a run binds datasets and its
preflight stages each into `<root>/<project>/cache/data/<roster-sha>/` on its box (datasets/staging.py).
"""

from django.conf import settings
from django.db import models
from django.urls import reverse

from projects.models import member_filter


class DatasetSource(models.TextChoices):
    CONTROL = "control", "a directory on the control host (under its source roots)"
    BOX = "box", "a directory on a registered box of the project"


class DatasetState(models.TextChoices):
    SCANNING = "scanning", "being hashed on its box"
    READY = "ready", "ready"
    REFUSED = "refused", "refused"


class DatasetQuerySet(models.QuerySet):
    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        rule = member_filter(user, "project__")
        return self if rule is None else self.filter(rule)


class Dataset(models.Model):
    project = models.ForeignKey("projects.Project", on_delete=models.PROTECT, related_name="datasets")
    name = models.SlugField(max_length=60)
    source_kind = models.CharField(max_length=10, choices=DatasetSource.choices)
    source_path = models.CharField(max_length=500)
    source_instance = models.ForeignKey(
        "profiles.Instance", null=True, blank=True, on_delete=models.PROTECT, related_name="datasets"
    )
    state = models.CharField(max_length=10, choices=DatasetState.choices, default=DatasetState.SCANNING)
    refusal = models.TextField(blank=True)
    roster = models.JSONField(default=list, blank=True, help_text="[{path, bytes, sha256}], sorted by path")
    roster_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    total_bytes = models.BigIntegerField(default=0)
    file_count = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    objects = DatasetQuerySet.as_manager()

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_dataset_name_per_project")]

    def __str__(self):
        return f"{self.project.slug}/{self.name}"

    def get_absolute_url(self):
        return reverse("dataset-detail", args=[self.pk])

    @property
    def staged_dir(self) -> str:
        """Where it is staged under a box's project cache (NodeLayout.cache: the fast disk where there is one)."""
        return f"data/{self.roster_sha256}"
