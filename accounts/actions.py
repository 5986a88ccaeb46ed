"""Password state changes, each audited (a PasswordEvent row). No HTTP here."""

from django.db import transaction

from accounts.models import PasswordDuty, PasswordEvent

SESSION_FLAG = "password_duty"


def do_issue_one_time_password(user, *, actor) -> None:
    """Called inside the transaction that set the password: the person must replace it at sign-in."""
    PasswordDuty.objects.get_or_create(user=user)
    PasswordEvent.objects.create(user=user, action="issued", actor=actor)


def do_record_own_password(user, how: str, *, actor) -> None:
    """The person chose their password (how: changed or reset): the duty, if any, is done."""
    with transaction.atomic(durable=True):
        PasswordDuty.objects.filter(user=user).delete()
        PasswordEvent.objects.create(user=user, action=how, actor=actor)
