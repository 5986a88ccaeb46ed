"""What the providers say beside our records: drift (an orphan, a release that kept billing), the balances
read under each key, and where each key was used."""

from django.db import models

from fleet.models.core import Credential, Instance


class DriftKind(models.TextChoices):
    ORPHAN = "orphan", "Billed by the provider, unknown here"
    STILL_BILLING = "still_billing", "Released here, still at the provider"
    RUNNING_NOT_STOPPED = "running_not_stopped", "Stopped here, running at the provider"
    ORPHAN_RESOURCE = "orphan_resource", "A volume or filesystem billed by the provider, registered nowhere here"


class ProviderDrift(models.Model):
    """What a provider lists under a team's key disagreeing with the dashboard. Open until a later
    reconciliation no longer sees it; one open row per box and kind (seen again: last_seen moves)."""

    profile_key = models.CharField(max_length=40)
    provider_id = models.CharField(max_length=200)
    credential = models.ForeignKey(Credential, on_delete=models.PROTECT, related_name="drifts")
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="drifts")
    kind = models.CharField(max_length=24, choices=DriftKind.choices)
    detail = models.TextField()
    # An orphan resource's $/h, counted in its project's spend (the one project granted the key; none
    # when several are: it is not any one project's).
    rate = models.DecimalField("hourly rate", max_digits=10, decimal_places=4, default=0)
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="orphan_drift"
    )
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "custody_providerdrift"  # moved from custody beside the boxes: its rows stay
        ordering = ["-first_seen", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["profile_key", "provider_id", "kind"],
                condition=models.Q(resolved_at__isnull=True),
                name="one_open_drift_per_box_and_kind",
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.profile_key}:{self.provider_id}"


class ProviderBalance(models.Model):
    """An account's balance under one key, as its provider last said, against the burn under that key:
    the low-balance deletion clocks (vast.ai at $0, RunPod, AutoDL arrears) made a clock with an end.
    `alarmed`: the thresholds (hours) already told since the balance last rose (a top-up starts again)."""

    profile_key = models.CharField(max_length=40)
    credential = models.ForeignKey(Credential, on_delete=models.CASCADE, related_name="balances")
    balance = models.DecimalField(max_digits=12, decimal_places=2)
    burn = models.DecimalField("burn ($/h)", max_digits=10, decimal_places=4)
    hours_left = models.FloatField(null=True, blank=True, help_text="None: nothing burns")
    alarmed = models.JSONField(default=list, blank=True)
    read_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile_key", "credential"], name="one_balance_per_key")]

    def __str__(self):
        return f"{self.profile_key} balance ${self.balance}"


class ProviderKeyUse(models.Model):
    """A provider key something was created with (a rent): reconciled with the provider like the keys
    registered boxes use, so a box created but never registered is found as an orphan."""

    profile_key = models.CharField(max_length=40)
    credential = models.ForeignKey(Credential, on_delete=models.CASCADE, related_name="+")
    since = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile_key", "credential"], name="one_use_per_key")]

    def __str__(self):
        return f"{self.profile_key} key {self.credential_id}"
