"""The test personas' roles, held per project: joining a project gives a persona the
roles it stands for there, as the data migration gave every member of the old global groups."""

from projects.models import Membership
from projects.roles import forget

# alice and erin operate and approve; bob and dave operate; carol and charlie only look.
ROLES = {
    "alice": {"operator", "approver"},
    "bob": {"operator"},
    "carol": set(),
    "charlie": set(),
    "dave": {"operator"},
    "erin": {"operator", "approver"},
}


def join(project, *users) -> None:
    """Make each user a member of project with their persona's roles there (none for anyone else)."""
    for user in users:
        roles = ROLES.get(user.get_username(), set())
        Membership.objects.update_or_create(
            project=project, user=user, defaults={"operator": "operator" in roles, "approver": "approver" in roles}
        )
        forget(user)


def grant(user, project, *roles: str) -> None:
    """Give user roles in project (a member after this), on top of those held."""
    membership, _ = Membership.objects.get_or_create(project=project, user=user)
    for role in roles:
        setattr(membership, role, True)
    membership.save()
    forget(user)
