"""Headers Django does not set by itself."""

from django.conf import settings
from django.http import HttpResponseBadRequest, JsonResponse
from django.http.multipartparser import MultiPartParserError


class ContentSecurityPolicyMiddleware:
    """Adds the Content-Security-Policy header (no inline script) to every response."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class RejectNulMiddleware:
    """A NUL byte in a path, query or form value is a clear 400 (JSON under /api/), never a 500.

    PostgreSQL refuses NUL in text, so `?q=%00` reached the database and failed there on every
    page that filters; nothing legitimate ever sends one.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            refused = self._has_nul(request) and "A NUL byte is not allowed in a request."
        except MultiPartParserError:
            refused = "The request body is not valid multipart/form-data."
        if refused:
            if request.path.startswith("/api/"):
                return JsonResponse({"error": "invalid", "detail": refused}, status=400)
            return HttpResponseBadRequest(refused)
        return self.get_response(request)

    @staticmethod
    def _has_nul(request) -> bool:
        if "\x00" in request.path:
            return True
        if request.content_type == "application/json" and (b"\\u0000" in request.body or b"\x00" in request.body):
            return True
        if request.method == "POST" and request.content_type in FORM_TYPES:
            values = [*request.GET.lists(), *request.POST.lists()]
        else:
            values = list(request.GET.lists())
        return any("\x00" in key or any("\x00" in value for value in items) for key, items in values)


FORM_TYPES = {"application/x-www-form-urlencoded", "multipart/form-data"}
