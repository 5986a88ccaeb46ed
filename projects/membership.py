"""Who may see a project: adding and removing members, each an audited change of access."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from projects.models import MembershipEvent, Project


def _member_named(username: str):
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise ValidationError(f"No active user named “{username}”.")
    return user


def do_add_member(project_id: int, username: str, *, actor) -> MembershipEvent | None:
    """Share a project with a teammate; None when they already were a member (nothing changes)."""
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update().get(pk=project_id)
        user = _member_named(username)
        if project.members.filter(pk=user.pk).exists():
            return None
        project.members.add(user)
        return MembershipEvent.objects.create(project=project, user=user, action="added", actor=actor)


def do_remove_member(project_id: int, username: str, *, actor) -> MembershipEvent | None:
    """Take a member's access away; their open live pages close at their next re-check."""
    with transaction.atomic(durable=True):
        project = Project.objects.select_for_update().get(pk=project_id)
        user = project.members.filter(username=username).first()
        if user is None:
            return None
        project.members.remove(user)
        return MembershipEvent.objects.create(project=project, user=user, action="removed", actor=actor)
