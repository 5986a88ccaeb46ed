"""Custody records: the evidence that a sealed export was copied, read back, loaded and recomputed."""

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
