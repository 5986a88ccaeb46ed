"""Whether the disk a box's data root is declared on is mounted there, measured over the box's transport
before anything is made under it: a tier's root is never created (`mkdir -p` made /hy-netdisk a plain
directory of the system disk), and a root that is a directory but not that disk (a Gpushare box not
marked 内网存储: /hy-netdisk on the system disk) refuses the box with the reason, never counts as the tier."""

import posixpath

from django.conf import settings

from fleet.audit import parse_df_bytes
from platforms.catalog import contains
from platforms.layout import resolve_home

ANCESTORS_LIMIT = 16  # the data root's parents looked at for the nearest one that exists


def tier_root_problem(transport, instance, home: str) -> str | None:
    """Why the box's data root is not on the disk its tier is mounted as, or None (a tier that is no mount
    of its own: nothing to measure)."""
    tier = instance.data_tier_info
    if not tier.get("mount"):
        return None
    root = resolve_home(tier["path"], home)
    found = transport.stat(root)
    if found is None or not found.is_dir:
        return (
            f"The {tier['name']} ({root}) is not on this box, and a tier's root is never created (a copy made there "
            "would sit on the system disk): mount it, or choose another data root on the box's page."
        )
    if instance.data_tier:
        return None  # declared: the preflight measures the data root on the declared tier's disk (runs/tiers.py)
    measured = _nearest(transport, resolve_home(instance.data_root, home)) or root
    answer = transport.run(["df", "-P", "--", measured], timeout=settings.SSH_COMMAND_TIMEOUT)
    mount = parse_df_bytes(answer.stdout.splitlines()) if answer.exit_code == 0 else None
    if mount is None:
        return f"The {tier['name']} ({root}) could not be measured (df answered nothing it could read): refused."
    if not contains(root, mount["mount"]):
        return (
            f"The {tier['name']} ({root}) is not a disk mounted there: {measured} is on {mount['device']} mounted at "
            f"{mount['mount']}, so a copy there would sit on that disk. Mount the {tier['name']}, or choose another "
            "data root on the box's page."
        )
    return None


def _nearest(transport, path: str) -> str | None:
    """path, or its nearest parent that exists on the box."""
    for _ in range(ANCESTORS_LIMIT):
        if transport.stat(path) is not None:
            return path
        parent = posixpath.dirname(path.rstrip("/")) or "/"
        if parent == path:
            return None
        path = parent
    return None
