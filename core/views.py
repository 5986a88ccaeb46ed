"""Site-wide views: the throttled login and the health endpoint."""

from dataclasses import asdict

from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.views import csrf as django_csrf
from django.views import defaults as django_defaults

from core import throttle
from core.health import system_health

LOCKED_MESSAGE = "Too many failed sign-ins. Wait a few minutes and try again."


def client_address(request) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is the client's to forge unless a proxy we trust sets it.
    return request.META.get("REMOTE_ADDR", "unknown")


class ThrottledLoginView(auth_views.LoginView):
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        address = client_address(request)
        if not throttle.admit(username, address):
            # Refuse before authenticate(): a locked account's password is not even checked.
            form = self.form_class(request, initial={"username": username})
            context = self.get_context_data(form=form, refusal=LOCKED_MESSAGE)
            return self.render_to_response(context, status=429)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):
        throttle.clear(form.get_user().get_username(), client_address(self.request))
        return super().form_valid(form)


def health_json(request):
    checks = system_health()
    body = {"ok": all(check.ok for check in checks), "checks": [asdict(check) for check in checks]}
    return JsonResponse(body, status=200 if body["ok"] else 503)


def _api_error(status: int, code: str, detail: str):
    """Django's own error pages, answered in JSON under /api/: a client there never parses HTML."""

    def view(request, exception=None):
        if request.path.startswith("/api/"):
            return JsonResponse({"error": code, "detail": detail}, status=status)
        return defaults[status](request, **({} if status == 500 else {"exception": exception}))

    return view


defaults = {
    400: django_defaults.bad_request,
    403: django_defaults.permission_denied,
    404: django_defaults.page_not_found,
    500: django_defaults.server_error,
}
bad_request = _api_error(400, "invalid", "The request could not be read.")
permission_denied = _api_error(403, "forbidden", "You do not have permission to do this.")
page_not_found = _api_error(404, "not_found", "Not found.")
server_error = _api_error(500, "server_error", "Something went wrong on our side; it is logged.")


def csrf_failure(request, reason=""):
    """A refused CSRF check: JSON under /api/ (a script there sends a token, not a cookie), Django's page elsewhere."""
    if request.path.startswith("/api/"):
        detail = "A signed-in browser session needs its CSRF token; a script authenticates with an API token."
        return JsonResponse({"error": "forbidden", "detail": detail}, status=403)
    return django_csrf.csrf_failure(request, reason=reason)
