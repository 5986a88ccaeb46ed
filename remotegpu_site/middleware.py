"""Headers Django does not set by itself."""

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    """Adds the Content-Security-Policy header (no inline script) to every response."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response
