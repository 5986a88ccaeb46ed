"""When the control host may run a box's commands, and as whom.

A command on the control host that runs as the worker's own OS user can read the worker's
environment (`/proc/<worker>/environ`: DATABASE_URL, provider keys), `var/secret_key`, and reach the
database: an operator of one project made herself superuser that way. So commands on the control host
run as a separate, unprivileged OS user (`REMOTEGPU_LOCAL_NODE_USER`), or, without one, only in the
one-person mode: the deployment's only active account is its administrator, who could do all that
anyway. Measured at every use, not declared: a second account ends the one-person mode at once.
"""

import os
import pwd

from django.conf import settings
from django.contrib.auth import get_user_model

OFF = "this deployment does not run commands on the control host (REMOTEGPU_LOCAL_NODE)"
NOT_ALONE = (
    "the control host runs a box's commands as the worker's own user only while its administrator is the "
    "only account; with a team, set REMOTEGPU_LOCAL_NODE_USER to an unprivileged OS user"
)


def one_person() -> bool:
    """The only active account is a superuser (the one-person `make run`)."""
    accounts = list(get_user_model().objects.filter(is_active=True).values_list("is_superuser", flat=True)[:2])
    return accounts == [True]


def user_problem(name: str) -> str | None:
    """Why name cannot be the OS user the control host's commands run as, or None."""
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        return f"REMOTEGPU_LOCAL_NODE_USER={name!r} is not an account on this machine"
    if account.pw_uid in (0, os.geteuid()):
        return f"REMOTEGPU_LOCAL_NODE_USER={name!r} is root or the worker's own user: name an unprivileged account"
    return None


def local_node_problem() -> str | None:
    """Why a command may not run on the control host now, or None."""
    if not settings.LOCAL_NODE:
        return OFF
    if settings.LOCAL_NODE_USER:
        return user_problem(settings.LOCAL_NODE_USER)
    return None if one_person() else NOT_ALONE


def runs_here_problem(user) -> str | None:
    """Why user may not run a run on the control host: only an administrator does."""
    if user is not None and getattr(user, "is_superuser", False):
        return None
    return "A run on the local workstation runs on the control host: only an administrator starts one."
