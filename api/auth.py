"""`Authorization: Token <token>` → the token's user; revoked or unknown tokens are refused."""

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from api.models import ApiToken, digest


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace") != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Token <token>, with exactly one token.")
        token = header[1].decode(errors="replace")
        row = ApiToken.objects.select_related("user").filter(key_sha256=digest(token), revoked=False).first()
        if row is None or not row.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        ApiToken.objects.filter(pk=row.pk).update(last_used=timezone.now())
        return row.user, row

    def authenticate_header(self, request):
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """The token scheme, as the API docs describe it (drf-spectacular knows DRF's own classes only)."""

    target_class = "api.auth.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Authorization: Token <token>`: make a token on the dashboard's API tokens page. "
            "It acts as its person with their roles and projects; revoke it there.",
        }
