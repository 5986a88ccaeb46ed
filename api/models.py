"""Per-user API tokens. Only a SHA-256 of each token is stored; the token itself is shown once."""

import hashlib
import secrets

from django.conf import settings
from django.db import models

PREFIX_LENGTH = 8


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def issue(self, user, name: str) -> tuple["ApiToken", str]:
        token = "rgpu_" + secrets.token_urlsafe(32)
        row = self.create(user=user, name=name[:80], prefix=token[: PREFIX_LENGTH + 5], key_sha256=digest(token))
        return row, token


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=80)
    prefix = models.CharField(max_length=16, help_text="The first characters, to recognise a token")
    key_sha256 = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self):
        return f"{self.prefix}… ({self.user})"
