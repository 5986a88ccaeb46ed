"""A person's own account: the duty to replace a password someone else chose.

The bottom app with projects: it imports no other app of ours.
"""

from django.conf import settings
from django.db import models


class PasswordDuty(models.Model):
    """The person signs in with a password an admin was shown (the Team page's one-time password): until
    they choose their own, every page sends them to the password change. Gone once they have."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="password_duty")
    since = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.user} must change a one-time password"


class PasswordEvent(models.Model):
    """Append-only: a password set by its owner (changed, or reset by mail) or issued by an admin."""

    ACTIONS = [("issued", "one-time password issued"), ("changed", "changed"), ("reset", "reset by mail")]
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="password_events")
    action = models.CharField(max_length=8, choices=ACTIONS)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.user} password {self.action}"
