"""Cache cleanup: a separate L1 action that removes only allow-listed, regenerable caches."""

from django.conf import settings

from custody.teardown import audit
from profiles.models import Instance
from profiles.nodes import transport_for
from profiles.transport import TransportError
from runs.layout import resolve_home

# Relative to $HOME, or to each project root under the data root: nothing else is ever removed.
HOME_CACHES = [".cache/pip", ".cache/torch/kernels"]
PROJECT_CACHE = "cache"


def clean(instance_id: int) -> dict:
    instance = Instance.objects.select_related("project").get(pk=instance_id)
    try:
        with transport_for(instance) as transport:
            home = transport.run_script('printf %s "$HOME"', timeout=settings.SSH_COMMAND_TIMEOUT).stdout
            root = resolve_home(instance.data_root, home)
            paths = [f"{home}/{path}" for path in HOME_CACHES] + [f"{root}/{instance.project.slug}/{PROJECT_CACHE}"]
            freed = transport.run(["du", "-sb", "--", *paths], timeout=settings.SSH_COMMAND_TIMEOUT).stdout
            transport.run(["rm", "-rf", "--", *paths], timeout=settings.SSH_COMMAND_TIMEOUT)
    except TransportError as exc:
        audit("cache_cleanup", f"Cache cleanup of {instance.name} failed: {exc}", instance=instance)
        return {"error": str(exc)}
    total = sum(int(line.split()[0]) for line in freed.splitlines() if line.split() and line.split()[0].isdigit())
    audit("cache_cleanup", f"Cache cleanup of {instance.name} freed {total} bytes", instance=instance, paths=paths)
    return {"freed": total, "paths": paths}
