"""At sign-in the session learns whether a password duty is open: pages then check the session only
(no query per page; query counts of pages stay pinned)."""

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from accounts.actions import SESSION_FLAG
from accounts.models import PasswordDuty


@receiver(user_logged_in, dispatch_uid="accounts-password-duty")
def remember_duty(sender, request, user, **kwargs):
    if request is not None and hasattr(request, "session"):
        if PasswordDuty.objects.filter(user=user).exists():
            request.session[SESSION_FLAG] = True
        else:
            request.session.pop(SESSION_FLAG, None)
