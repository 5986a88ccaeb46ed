"""The two roles, as Django groups mapped to permissions.

operators: may create projects, register instances and launch runs.
approvers: may approve cost actions; a requester never approves their own L3 request.
"""

from django.contrib.auth.models import Group, Permission

OPERATORS = "operators"
APPROVERS = "approvers"

ROLE_PERMISSIONS = {
    OPERATORS: ["projects.operate", "projects.add_project", "projects.change_project"],
    APPROVERS: ["projects.approve_cost"],
}


def _permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".", 1)
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def ensure_role_groups(**kwargs) -> None:
    """Create the role groups and give them exactly their permissions (idempotent)."""
    for name, dotted_names in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set([_permission(dotted) for dotted in dotted_names])
