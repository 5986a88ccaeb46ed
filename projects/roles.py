"""Roles per project behind Django's own `user.has_perm(perm, project)`.

A member holds operator, approver, both or neither in each project; an admin (superuser) holds every
permission everywhere (Django answers that before any backend). Asked without a project, a permission
means "in some project": it decides whether a page offers a button, never whether an action runs.
"""

from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from projects.models import Membership, Project, Role

# The permission vocabulary the code already speaks, and the project role that now grants each.
ROLE_OF_PERMISSION = {
    "projects.operate": Role.OPERATOR,
    "projects.change_project": Role.OPERATOR,  # share the project, configure its notifications
    "projects.add_project": Role.OPERATOR,  # asked without a project: an operator somewhere starts another
    "projects.approve_cost": Role.APPROVER,
}
CACHE = "_project_roles"


def roles_by_project(user) -> dict[int, set[str]]:
    """Every project's roles for user, read once per user object (one query per request)."""
    cached = getattr(user, CACHE, None)
    if cached is None:
        cached = {}
        for row in Membership.objects.filter(user=user).values("project_id", *Role.values):
            cached[row["project_id"]] = {role for role in Role.values if row[role]}
        setattr(user, CACHE, cached)
    return cached


def forget(user) -> None:
    """After a role change: the next question about user reads the table again."""
    if hasattr(user, CACHE):
        delattr(user, CACHE)


class ProjectRoleBackend(ModelBackend):
    """Signs people in as ModelBackend does; answers permissions from the memberships only (a global
    group or user permission is not a role: the data migration moved them onto the memberships)."""

    def has_module_perms(self, user_obj, app_label):
        return user_obj.is_active and user_obj.is_superuser  # the Django admin is an administrator's

    def has_perm(self, user_obj, perm, obj=None):
        role = ROLE_OF_PERMISSION.get(perm)
        if role is None or not user_obj.is_active or user_obj.is_anonymous:
            return False
        held = roles_by_project(user_obj)
        if obj is None:
            return any(role in roles for roles in held.values())
        if isinstance(obj, Project):
            return role in held.get(obj.pk, ())
        return False


def require(user, perm: str, project) -> None:
    """PermissionDenied (a 403, a refused action) unless user holds perm's role in project."""
    if not user.has_perm(perm, project):
        raise PermissionDenied(f"This needs the {ROLE_OF_PERMISSION[perm].label} role in project {project.name}.")


def require_second_approver(actor, project, requester_id, decides: str, noun: str) -> None:
    """A cost decision is another person's: an approver of the project (decides: "its rents"), never the
    one who asked for it (noun: "a rent")."""
    if not actor.has_perm("projects.approve_cost", project):
        raise PermissionDenied(f"Only an approver of project {project.name} decides {decides}.")
    if requester_id == actor.pk:
        raise PermissionDenied(f"The requester of {noun} never approves it: ask another approver.")
