"""Delete one copy of a sealed export; the paths are ours (built from the layout), never user input."""

import shutil

from django.conf import settings

from custody.evidence import latest_verified
from custody.models import EvidenceLocation
from custody.store import custody_dir
from runs.remote import NodeSession


def remove_copy(run, location: str) -> dict:
    if location == EvidenceLocation.CUSTODY:
        path = custody_dir(run)
        shutil.rmtree(path)
        return {"deleted": str(path)}
    with NodeSession(run) as node:
        if location == EvidenceLocation.NODE:
            path = node.layout.export
        else:
            path = latest_verified(run).mirror_uri
            if not path.endswith(f"/remotegpu-custody/{run.project.slug}/{run.run_id}"):
                raise OSError(f"refusing to delete {path}: not a mirror this dashboard made")
        result = node.transport.run(["rm", "-rf", "--", path], timeout=settings.SSH_COMMAND_TIMEOUT)
    if result.exit_code != 0:
        raise OSError(f"rm on the node exited {result.exit_code}: {result.stderr[-300:]}")
    return {"deleted": path}
