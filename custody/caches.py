"""Cache cleanup: a separate L1 action that removes only allow-listed, regenerable caches."""

from functools import partial

from django.db import transaction

from custody.audit import audit
from custody.evidence import present_on
from profiles.layout import resolve_home
from profiles.models import Instance
from profiles.node.client import NodeClient
from profiles.node.transport import TransportError

# Relative to $HOME, or to each project root under the data root: nothing else is ever removed.
HOME_CACHES = [".cache/pip", ".cache/torch/kernels"]
PROJECT_CACHE = "cache"


def _sparing_evidence(instance, home: str, paths: list[str]) -> list[str]:
    """Drop any cache path that holds (or is) a copy of a sealed export: evidence is never a cache."""
    copies = [resolve_home(copy.path, home) for copy in present_on(instance)]
    return [p for p in paths if not any(c == p or c.startswith(p.rstrip("/") + "/") for c in copies)]


def do_request_cache_cleanup(instance_id: int, *, actor) -> None:
    """Queue the cleanup (audited now, executed by a worker once this commits)."""
    from custody.tasks import clean_caches

    with transaction.atomic(durable=True):
        instance = Instance.objects.select_for_update(no_key=True).get(pk=instance_id)
        audit("cache_cleanup", f"Cache cleanup of {instance.name} queued", actor, instance=instance)
        transaction.on_commit(partial(clean_caches.delay, instance.pk))


def clean(instance_id: int) -> dict:
    instance = Instance.objects.select_related("project").get(pk=instance_id)
    try:
        with NodeClient(instance) as node:
            root = resolve_home(instance.data_root, node.home)
            paths = [f"{node.home}/{path}" for path in HOME_CACHES] + [
                f"{root}/{instance.project.slug}/{PROJECT_CACHE}"
            ]
            paths = _sparing_evidence(instance, node.home, paths)
            if not paths:
                return {"freed": 0, "paths": []}
            answer = node.clean_caches(paths)
    except TransportError as exc:
        audit("cache_cleanup", f"Cache cleanup of {instance.name} failed: {exc}", instance=instance)
        return {"error": str(exc)}
    total = answer["freed"]
    audit("cache_cleanup", f"Cache cleanup of {instance.name} freed {total} bytes", instance=instance, paths=paths)
    return {"freed": total, "paths": paths}
