"""Team administration in the app: an admin creates users with their e-mail, gives
them roles (operator and approver per project, admin everywhere) and shares projects, each change
audited. No HTTP here."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.crypto import get_random_string

from accounts.actions import do_issue_one_time_password
from core.audit import record
from core.models import AuditAction
from projects.membership import access_reduced
from projects.models import Membership, Project, Role
from projects.roles import forget

PROJECT_ROLES = set(Role.values)


def _admin_only(actor) -> None:
    if not actor.is_superuser:
        raise PermissionDenied("Only an administrator manages the team.")


def memberships_of(user) -> list:
    """The person's projects with the roles they hold in each (prefetched by the Team page)."""
    return sorted(user.memberships.all(), key=lambda membership: membership.project.name)


def do_create_user(username: str, email: str, roles: set[str], projects, *, actor) -> tuple[object, str]:
    """A new member with a one-time password (shown once to the admin, never stored in clear); the
    operator and approver roles chosen hold in each project chosen, admin everywhere."""
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
    _known(roles - {"admin"})
    if roles - {"admin"} and not projects:
        raise ValidationError("Operator and approver are roles in a project: choose the projects they hold them in.")
    password = get_random_string(20)
    try:
        with transaction.atomic(durable=True):
            user = get_user_model().objects.create_user(username=username, email=email, password=password)
            do_issue_one_time_password(user, actor=actor)  # replaced by the person at first sign-in
            _set_admin(user, "admin" in roles, actor)
            for project in projects:
                membership = Membership.objects.create(project=project, user=user)
                message = f"{user.username} added to {project.slug}"
                record(AuditAction.MEMBER_ADDED, message, actor=actor, project=project, subject=user)
                _set_project_roles(membership, roles - {"admin"}, actor)
    except IntegrityError:
        raise ValidationError(f"There is already a user named “{username}”.") from None
    return user, password


def do_set_roles(user_id: int, admin: bool, project_roles: dict[int, set[str]], *, actor) -> list[str]:
    """The user's roles become exactly these: admin or not, and per project of theirs named in
    project_roles the roles given (projects they are not a member of are refused: share first).
    An admin never removes their own admin role."""
    _admin_only(actor)
    for roles in project_roles.values():
        _known(roles)
    with transaction.atomic(durable=True):
        user = get_user_model().objects.select_for_update().get(pk=user_id)
        if user.pk == actor.pk and not admin:
            raise ValidationError("You cannot remove your own admin role: ask another admin.")
        memberships = {m.project_id: m for m in Membership.objects.select_for_update().filter(user=user)}
        strangers = set(project_roles) - set(memberships)
        if strangers:
            raise ValidationError(f"{user.username} is not a member of every project named: add them to it first.")
        changes = _set_admin(user, admin, actor)
        for project_id, roles in project_roles.items():
            changes += _set_project_roles(memberships[project_id], roles, actor)
        if any(change.startswith("-") for change in changes):
            access_reduced.send(sender=Project, user_id=user.pk)  # open pages re-check what they may show
    forget(user)
    return changes


def _known(roles: set[str]) -> None:
    unknown = roles - PROJECT_ROLES
    if unknown:
        raise ValidationError(f"Unknown role(s): {', '.join(sorted(unknown))}.")


def _set_admin(user, admin: bool, actor) -> list[str]:
    if admin == user.is_superuser:
        return []
    user.is_superuser = user.is_staff = admin
    user.save(update_fields=["is_superuser", "is_staff"])
    action, message = (
        (AuditAction.ROLE_GRANTED, "admin granted to") if admin else (AuditAction.ROLE_REVOKED, "admin revoked from")
    )
    record(action, f"{message} {user.username}", actor=actor, subject=user, role="admin")
    return ["+admin" if admin else "-admin"]


def _set_project_roles(membership, roles: set[str], actor) -> list[str]:
    changes = []
    for role in Role.values:
        wanted = role in roles
        if getattr(membership, role) == wanted:
            continue
        setattr(membership, role, wanted)
        changes.append(f"{'+' if wanted else '-'}{role}@{membership.project_id}")
        action = AuditAction.ROLE_GRANTED if wanted else AuditAction.ROLE_REVOKED
        message = f"{role} {'granted to' if wanted else 'revoked from'} {membership.user.username}"
        record(action, message, actor=actor, project_id=membership.project_id, subject_id=membership.user_id, role=role)
    if changes:
        membership.save(update_fields=Role.values)
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
