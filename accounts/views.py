"""A person's own password: change it (signed in) or reset it by mail (signed out). Thin: Django's
views, the duty cleared and the change audited in accounts.actions."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.urls import reverse_lazy

from accounts.actions import SESSION_FLAG, do_record_own_password
from core import throttle
from core.views import client_address


class PasswordChangeView(auth_views.PasswordChangeView):
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("dashboard")

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "duty": bool(self.request.session.get(SESSION_FLAG))}

    def form_valid(self, form):
        response = super().form_valid(form)  # saves, and keeps this session signed in
        do_record_own_password(self.request.user, "changed", actor=self.request.user)
        self.request.session.pop(SESSION_FLAG, None)
        messages.success(self.request, "Your password is changed.")
        return response


class PasswordResetView(auth_views.PasswordResetView):
    """Mails a reset link through the configured e-mail backend; the page never says whether the
    address is known. Throttled per address like the sign-in."""

    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("password-reset-done")

    def form_valid(self, form):
        email = form.cleaned_data["email"].strip().lower()
        if not throttle.admit(f"reset:{email}", client_address(self.request)):
            return self.render_to_response(
                self.get_context_data(form=form, refusal="Too many reset requests. Wait a few minutes."), status=429
            )
        return super().form_valid(form)


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_done.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("login")

    def form_valid(self, form):
        response = super().form_valid(form)
        do_record_own_password(form.user, "reset", actor=form.user)
        messages.success(self.request, "Your password is set. Sign in with it.")
        return response
