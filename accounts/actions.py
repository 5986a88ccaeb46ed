"""Password state changes, each audited (the one audit log). No HTTP here."""

from django.db import transaction

from accounts.models import PasswordDuty
from core.audit import record
from core.models import AuditAction

SESSION_FLAG = "password_duty"


def do_issue_one_time_password(user, *, actor) -> None:
    """Called inside the transaction that set the password: the person must replace it at sign-in."""
    PasswordDuty.objects.get_or_create(user=user)
    record(AuditAction.PASSWORD_ISSUED, f"one-time password issued to {user.username}", actor=actor, subject=user)


def do_record_own_password(user, how: str, *, actor) -> None:
    """The person chose their password (how: changed or reset): the duty, if any, is done."""
    with transaction.atomic(durable=True):
        PasswordDuty.objects.filter(user=user).delete()
        action = AuditAction.PASSWORD_CHANGED if how == "changed" else AuditAction.PASSWORD_RESET
        what = "changed their password" if how == "changed" else "reset their password by mail"
        record(action, f"{user.username} {what}", actor=actor, subject=user)
