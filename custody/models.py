"""Custody records: the evidence that a sealed export was copied, read back, loaded and recomputed."""

from django.conf import settings
from django.db import models


class CustodyStatus(models.TextChoices):
    PULLING = "pulling", "Pulling"
    VERIFYING = "verifying", "Verifying"
    VERIFIED = "verified", "Verified"
    FAILED = "failed", "Failed"


class CustodyRecord(models.Model):
    """One verification of one run's sealed export; a re-run makes a new record (L1, no approval)."""

    run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="custody_records")
    created = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=12, choices=CustodyStatus.choices, default=CustodyStatus.PULLING)
    uri = models.CharField(max_length=500, blank=True, help_text="The canonical custody copy")
    roster_sha256 = models.CharField(max_length=64, blank=True)
    total_bytes = models.BigIntegerField(default=0)
    file_count = models.PositiveIntegerField(default=0)
    bytes_done = models.BigIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0)
    provider = models.CharField(max_length=40, blank=True)
    mutability = models.CharField(max_length=40, default="immutable sealed export")
    verified_at = models.DateTimeField(null=True, blank=True)
    mirror_uri = models.CharField(max_length=500, blank=True, help_text="Node-side durable replica, if made")
    mirror_verified = models.BooleanField(default=False)
    mirror_tier = models.CharField(max_length=60, blank=True, help_text="The profile tier the mirror was made on")
    mirror_mount = models.JSONField(
        default=dict,
        blank=True,
        help_text="The mount the mirror was measured on (mount point, fstype, device): it counts on its tier "
        "only while a re-hash measures it there again.",
    )
    copy_deleted_at = models.DateTimeField(null=True, blank=True)
    mirror_deleted_at = models.DateTimeField(null=True, blank=True)
    consumer_location = models.CharField(max_length=500, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    failure = models.TextField(blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"custody of {self.run_id}: {self.status}"


class Artifact(models.Model):
    record = models.ForeignKey(CustodyRecord, on_delete=models.CASCADE, related_name="artifacts")
    path = models.CharField(max_length=500)
    bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    verified = models.BooleanField(default=False)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["record", "path"], name="one_artifact_per_path")]

    def __str__(self):
        return self.path


class EvidenceLocation(models.TextChoices):
    NODE = "node", "export on the box"
    CUSTODY = "custody", "custody copy"
    MIRROR = "mirror", "durable mirror on the box"


class ProjectMetric(models.Model):
    """A project's own metric, registered without code: an expression over results.parquet's columns
    (custody/expressions.py), reduced to one number, with its direction. The readback recomputes it
    wherever a run claims it in metrics.json."""

    DIRECTIONS = [("↑", "higher is better"), ("↓", "lower is better")]

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="metrics")
    name = models.SlugField(max_length=40)
    direction = models.CharField(max_length=1, choices=DIRECTIONS)
    expression = models.CharField(max_length=300, help_text="e.g. abs(prediction - target) / abs(target)")
    reducer = models.CharField(max_length=8, default="mean")
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_metric_name_per_project")]

    def __str__(self):
        return f"{self.name} {self.direction}"
