"""Delete one copy of a sealed export; the paths are ours (built from the layout), never user input.
On the box the wrapper deletes it (`remove-copy`) and refuses anything outside the root named."""

import posixpath
import shutil

from custody.copies import latest_verified
from custody.models import EvidenceLocation
from custody.store import custody_dir
from runs.box_spec import run_node


def remove_copy(run, location: str) -> dict:
    if location == EvidenceLocation.CUSTODY:
        path = custody_dir(run)
        shutil.rmtree(path)
        return {"deleted": str(path)}
    with run_node(run) as node:
        if location == EvidenceLocation.NODE:
            path = node.layout.export
        else:
            path = latest_verified(run).mirror_uri
            if not path.endswith(f"/remotegpu-custody/{run.project.slug}/{run.run_id}"):
                raise OSError(f"refusing to delete {path}: not a mirror this dashboard made")
        answer = node.remove_copy(path, posixpath.dirname(path))
    return {"deleted": path, "bytes": answer["bytes"], "was_there": answer["removed"]}
