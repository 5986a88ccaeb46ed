"""Site-wide views: the throttled login and the health endpoint."""

from dataclasses import asdict

from django.contrib.auth import views as auth_views
from django.http import JsonResponse

from remotegpu_site import throttle
from remotegpu_site.health import system_health

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
