"""Team administration in the app (issue 18 §5): an admin creates users with their e-mail, gives
them roles (operator, approver, admin) and shares projects, each change audited. No HTTP here."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.crypto import get_random_string

from accounts.actions import do_issue_one_time_password
from projects.models import MembershipEvent, Project, RoleEvent
from runs.roles import APPROVERS, OPERATORS

ROLES = {"operator": OPERATORS, "approver": APPROVERS}


def _admin_only(actor) -> None:
    if not actor.is_superuser:
        raise PermissionDenied("Only an administrator manages the team.")


def roles_of(user) -> set[str]:
    names = {group.name for group in user.groups.all()}
    found = {role for role, group in ROLES.items() if group in names}
    return found | ({"admin"} if user.is_superuser else set())


def do_create_user(username: str, email: str, roles: set[str], projects, *, actor) -> tuple[object, str]:
    """A new member with a one-time password (shown once to the admin, never stored in clear)."""
    _admin_only(actor)
    username, email = username.strip(), email.strip()
    if not username or len(username) > 150:
        raise ValidationError("A user name of 1 to 150 characters.")
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError(
            "An e-mail address: approvers are mailed requests, members their notifications."
        ) from None
    password = get_random_string(20)
    try:
        with transaction.atomic(durable=True):
            user = get_user_model().objects.create_user(username=username, email=email, password=password)
            do_issue_one_time_password(user, actor=actor)  # replaced by the person at first sign-in
            _set_roles(user, roles, actor)
            for project in projects:
                project.members.add(user)
                MembershipEvent.objects.create(project=project, user=user, action="added", actor=actor)
    except IntegrityError:
        raise ValidationError(f"There is already a user named “{username}”.") from None
    return user, password


def do_set_roles(user_id: int, roles: set[str], *, actor) -> list[str]:
    """The user's roles become exactly `roles`; an admin never removes their own admin role."""
    _admin_only(actor)
    with transaction.atomic(durable=True):
        user = get_user_model().objects.select_for_update().get(pk=user_id)
        if user.pk == actor.pk and "admin" not in roles:
            raise ValidationError("You cannot remove your own admin role: ask another admin.")
        return _set_roles(user, roles, actor)


def _set_roles(user, roles: set[str], actor) -> list[str]:
    unknown = roles - set(ROLES) - {"admin"}
    if unknown:
        raise ValidationError(f"Unknown role(s): {', '.join(sorted(unknown))}.")
    before, changes = roles_of(user), []
    for role, group_name in ROLES.items():
        group = Group.objects.get(name=group_name)
        if role in roles and role not in before:
            user.groups.add(group)
            changes.append(f"+{role}")
        elif role not in roles and role in before:
            user.groups.remove(group)
            changes.append(f"-{role}")
    admin = "admin" in roles
    if admin != user.is_superuser:
        user.is_superuser = user.is_staff = admin
        user.save(update_fields=["is_superuser", "is_staff"])
        changes.append("+admin" if admin else "-admin")
    for change in changes:
        RoleEvent.objects.create(
            user=user, role=change[1:], action="granted" if change[0] == "+" else "revoked", actor=actor
        )
    return changes


def do_set_email(user_id: int, email: str, *, actor) -> None:
    _admin_only(actor)
    try:
        validate_email(email.strip())
    except ValidationError:
        raise ValidationError("Not an e-mail address.") from None
    get_user_model().objects.filter(pk=user_id).update(email=email.strip())


def projects_named(slugs) -> list:
    return list(Project.objects.filter(slug__in=slugs))
