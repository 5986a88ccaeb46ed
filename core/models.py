"""The one audit log: every change to access, credentials, money or evidence, in one append-only table.

It lives at the bottom so that every app writes it (a password issued, a role granted, a launch over
budget approved, a teardown done); its foreign keys name the tables above by string, which is a
reference in the database, not an import. Run and instance timelines (RunEvent, InstanceEvent) stay
where they are: they tell a run's or a box's story; this tells who changed what.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditAction(models.TextChoices):
    # Access: who may sign in and what they may do.
    PASSWORD_ISSUED = "password.issued", "one-time password issued"
    PASSWORD_CHANGED = "password.changed", "password changed"
    PASSWORD_RESET = "password.reset", "password reset by mail"
    MEMBER_ADDED = "member.added", "member added"
    MEMBER_REMOVED = "member.removed", "member removed"
    ROLE_GRANTED = "role.granted", "role granted"
    ROLE_REVOKED = "role.revoked", "role revoked"
    # Credentials and the secrets behind notifications.
    CREDENTIAL_CHANGED = "credential.changed", "credential registered or changed"
    VARIABLE_CHANGED = "variable.changed", "notification variable registered or changed"
    # Money: what may be spent, and what was.
    ENVELOPE_CHANGED = "envelope.changed", "cost envelope changed"
    WASTE_SHUTDOWN_SET = "project.waste_shutdown", "automatic shutdown of waste set"
    SPEND_APPROVED = "spend.approved", "spend approved"
    SPEND_REJECTED = "spend.rejected", "spend rejected"
    RENT_ASKED = "rent.asked", "rent asked"
    RENT_APPROVED = "rent.approved", "rent approved"
    RENT_REJECTED = "rent.rejected", "rent rejected"
    RENT_CANCELLED = "rent.cancelled", "rent cancelled"
    RENT_ATTEMPT = "rent.attempt", "rent: a candidate asked"
    RENT_CREATED = "rent.created", "rent: box created at the provider"
    RENT_FAILED = "rent.failed", "rent failed"
    RUN_LAUNCH_ASKED = "run.launch_asked", "launch asked"
    RUN_STOP_ASKED = "run.stop_asked", "stop asked"
    RUN_RETRIED = "run.retried", "run retried"
    RUN_CONTINUED = "run.continued", "run continued on another box"
    RUN_START_HOOK = "run.start_hook", "start hook installed on a box (relaunches with no control plane)"
    RUN_GPU_WAIVED = "run.gpu_waived", "GPU held by another process: waived"
    RUN_RESEALED = "run.resealed", "an attempt quarantined for paperwork alone sealed after all"
    INSTANCE_CREATED = "instance.created", "box registered"
    INSTANCE_EDITED = "instance.edited", "box edited"
    INSTANCE_STATE_RECORDED = "instance.state_recorded", "box state recorded by a person"
    INSTANCE_KEY_PINNED = "instance.key_pinned", "host key pinned"
    RESOURCE_REGISTERED = "instance.resource_registered", "billable resource registered"
    # Evidence: teardown requests, their decisions and their results (values kept from custody's log).
    FILED = "filed", "teardown filed (its proofs being gathered)"
    REQUESTED = "requested", "teardown requested"
    REFUSED = "refused", "teardown refused"
    APPROVED = "approved", "teardown approved"
    REJECTED = "rejected", "teardown rejected"
    CANCELLED = "cancelled", "teardown cancelled"
    EXPIRED = "expired", "teardown expired"
    REDRIVEN = "redriven", "teardown re-driven"
    EXECUTING = "executing", "teardown executing"
    AWAITING_ATTESTATION = "awaiting_attestation", "teardown awaiting attestation"
    ATTESTED = "attested", "teardown attested"
    PROVIDER_STATUS = "provider_status", "provider status"
    NEEDS_ATTENTION = "needs_attention", "teardown needs attention"
    DONE = "done", "teardown done"
    FAILED = "failed", "teardown failed"
    # Evidence: what a run's data identity rests on.
    DATASET_REGISTERED = "dataset.registered", "dataset registered"
    DATASET_SCANNED = "dataset.scanned", "dataset hashed on its box"
    RETRIED = "retried", "teardown retried"
    HOLD_PLACED = "hold_placed", "hold placed"
    HOLD_RETIRED = "hold_retired", "hold retired"
    CACHE_CLEANUP = "cache_cleanup", "cache cleanup"
    METRIC_REGISTERED = "metric_registered", "project metric registered"

    @classmethod
    def areas(cls) -> dict[str, list[str]]:
        """The filter's groups: access, credentials, money, evidence."""
        prefixes = {"access": ("password.", "member.", "role."), "credentials": ("credential.", "variable.")}
        prefixes["money"] = ("envelope.", "spend.", "rent.", "run.", "instance.")
        grouped = {area: [a for a in cls.values if a.startswith(p)] for area, p in prefixes.items()}
        grouped["evidence"] = [a for a in cls.values if "." not in a or a.startswith("dataset.")]
        return grouped


class AuditEntry(models.Model):
    """Append-only: one change, who made it (empty: the system), and what it touched."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    action = models.CharField(max_length=32, db_index=True, choices=AuditAction.choices)
    project = models.ForeignKey("projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    instance = models.ForeignKey("profiles.Instance", null=True, blank=True, on_delete=models.PROTECT)
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    request = models.ForeignKey("delivery.TeardownRequest", null=True, blank=True, on_delete=models.PROTECT)
    credential = models.ForeignKey(
        "profiles.Credential", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Whom an access change is about (the member added, the user granted a role, whose password).
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "custody_auditentry"  # custody's teardown log grew into the one log: its rows stay
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.action}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("the audit log is append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("the audit log is append-only")
