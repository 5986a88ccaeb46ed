"""Who may see a project: adding and removing members, each an audited change of access."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.dispatch import Signal

from core.audit import record
from core.models import AuditAction, AuditEntry
from projects.models import Membership, Project, Role

# Sent in the transaction that took a person's access away (user_id): the live pages above listen and
# close that person's open sockets once it commits, instead of at their next periodic re-check.
access_reduced = Signal()


def _member_named(username: str):
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise ValidationError(f"No active user named “{username}”.")
    return user


def do_add_member(project_id: int, username: str, *, actor, as_operator: bool = False) -> AuditEntry | None:
    """Share a project with a teammate, with no role in it (an admin grants roles on the Team page);
    None when they already were a member (nothing changes). The creator of a project joins it as its
    first operator (as_operator)."""
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update(no_key=True).get(pk=project_id)
        user = _member_named(username)
        if project.members.filter(pk=user.pk).exists():
            return None
        Membership.objects.create(project=project, user=user, operator=as_operator)
        if as_operator:
            message = f"operator granted to {user.username} (creator of the project)"
            record(AuditAction.ROLE_GRANTED, message, actor=actor, project=project, subject=user, role=Role.OPERATOR)
        message = f"{user.username} added to {project.slug}"
        return record(AuditAction.MEMBER_ADDED, message, actor=actor, project=project, subject=user)


def do_remove_member(project_id: int, username: str, *, actor) -> AuditEntry | None:
    """Take a member's access away; their open live pages close when this commits."""
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update(no_key=True).get(pk=project_id)
        user = project.members.filter(username=username).first()
        if user is None:
            return None
        project.members.remove(user)
        access_reduced.send(sender=Project, user_id=user.pk)
        message = f"{user.username} removed from {project.slug}"
        return record(AuditAction.MEMBER_REMOVED, message, actor=actor, project=project, subject=user)
