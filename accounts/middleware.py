"""A one-time password opens nothing but its own replacement."""

from django.http import JsonResponse
from django.shortcuts import redirect
from django.urls import reverse

from accounts.actions import SESSION_FLAG


class PasswordDutyMiddleware:
    """While the session carries the duty, every page redirects to the password change and the API
    answers 403; the change itself, sign-out and static files stay reachable."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if self._owes(request) and not self._open(request.path):
            if request.path.startswith("/api/"):
                detail = "Change your one-time password first (Password, in the navigation)."
                return JsonResponse({"error": "password_change_required", "detail": detail}, status=403)
            return redirect(reverse("password-change"))
        return self.get_response(request)

    @staticmethod
    def _owes(request) -> bool:
        session = getattr(request, "session", None)
        return session is not None and bool(session.get(SESSION_FLAG)) and request.user.is_authenticated

    @staticmethod
    def _open(path: str) -> bool:
        allowed = (reverse("password-change"), reverse("logout"), "/static/", "/health.json")
        return path.startswith(allowed)
