"""Cache cleanup: a separate L1 action that removes only allow-listed, regenerable caches, and the
checkpoint copies of runs whose export is verified in custody (nothing resumes from them any more):
their directory on the box's durable tier and the control host's copies."""

import posixpath
import shutil

from django.db import transaction

from core.enqueue import after_commit
from custody.copies import present_on
from custody.models import CustodyStatus
from delivery.audit import audit
from fleet.models import Instance
from fleet.node_client import NodeClient
from node.transport import TransportError
from platforms.layout import NodeLayout, resolve_home
from runs import ckpt_pull
from runs.models import Run, RunState

# Relative to $HOME, or to each project root under the data root: nothing else is ever removed.
HOME_CACHES = [".cache/pip", ".cache/torch/kernels"]
PROJECT_CACHE = "cache"


def _sparing_evidence(instance, home: str, paths: list[str]) -> list[str]:
    """Drop any cache path that holds (or is) a copy of a sealed export: evidence is never a cache."""
    copies = [resolve_home(copy.path, home) for copy in present_on(instance)]
    return [p for p in paths if not any(c == p or c.startswith(p.rstrip("/") + "/") for c in copies)]


def done_checkpoints(instance) -> list[Run]:
    """Runs whose checkpoint copies were last made from this box and whose export is verified."""
    verified = Run.objects.filter(
        project_id=instance.project_id, state=RunState.EXPORTED, custody_records__status=CustodyStatus.VERIFIED
    ).distinct()
    return [run for run in verified.select_related("project") if run.durable_ckpt.get("instance_id") == instance.pk]


def _checkpoint_dirs(instance, home: str, runs: list[Run]) -> list[str]:
    """Each run's directory under the box's durable root (where the wrapper mirrored its checkpoints)."""
    root = instance.mirror_root or instance.profile.durable_root
    if not root:
        return []
    base = resolve_home(root, home)
    return [posixpath.join(base, "remotegpu-ckpt", run.project.slug, run.run_id) for run in runs]


def do_request_cache_cleanup(instance_id: int, *, actor) -> None:
    """Queue the cleanup (audited now, executed by a worker once this commits)."""

    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        audit("cache_cleanup", f"Cache cleanup of {instance.name} queued", actor, instance=instance)
        after_commit("delivery.tasks.clean_caches", instance.pk)


def clean(instance_id: int) -> dict:
    instance = Instance.objects.select_related("project").get(pk=instance_id)
    try:
        with NodeClient(instance) as node:
            root = resolve_home(instance.data_root, node.home)
            paths = [f"{node.home}/{path}" for path in HOME_CACHES] + [
                f"{root}/{instance.project.slug}/{PROJECT_CACHE}"
            ]
            if instance.hot_root:  # the project's cache on the fast local disk (NodeLayout.cache)
                hot = NodeLayout(root, instance.project.slug, "", hot_root=resolve_home(instance.hot_root, node.home))
                paths.append(hot.cache)
            done = done_checkpoints(instance)
            paths = _sparing_evidence(instance, node.home, paths + _checkpoint_dirs(instance, node.home, done))
            if not paths:
                return {"freed": 0, "paths": []}
            answer = node.clean_caches(paths)
    except TransportError as exc:
        audit("cache_cleanup", f"Cache cleanup of {instance.name} failed: {exc}", instance=instance)
        return {"error": str(exc)}
    total = answer["freed"] + sum(_remove_control_copies(run) for run in done)
    audit("cache_cleanup", f"Cache cleanup of {instance.name} freed {total} bytes", instance=instance, paths=paths)
    return {"freed": total, "paths": paths}


def _remove_control_copies(run: Run) -> int:
    """The control host's checkpoint copies of a verified run: bytes freed."""
    directory = ckpt_pull.control_dir(run)
    freed = sum(path.stat().st_size for path in directory.rglob("*") if path.is_file()) if directory.exists() else 0
    shutil.rmtree(directory, ignore_errors=True)
    return freed
