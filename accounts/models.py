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
