"""A tiny declarative validator for platform profile files: every error names its field path."""

from dataclasses import dataclass


class ProfileError(Exception):
    """A profile file is broken; the message names the file and the field."""

    def __init__(self, file: str, field: str, problem: str):
        super().__init__(f"{file}: {field}: {problem}")
        self.file, self.field, self.problem = file, field, problem


@dataclass(frozen=True)
class Optional:
    inner: object


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]


@dataclass(frozen=True)
class ListOf:
    inner: object
    min_items: int = 0


@dataclass(frozen=True)
class MapOf:
    inner: object


SURVIVES = {"stop": Optional(bool), "release": Optional(bool), "destroy": Optional(bool)}
# Keys a profile may leave out (every other key is written out, even when null).
OMITTABLE = {"mount", "hot_root"}
VIA = Choice(("api", "ssh", "console", "none"))
# verb: what a person chooses in the console for this consequence alone (a shutdown's verb never names
# a release: the composite meter-stop verb once told an operator to "shut down, then release").
CONSEQUENCE = {"via": VIA, "irreversible": bool, "verb": str}

# A platform's hooks (checked against ../shared/reference/profiles/ by tests/fleet/test_hooks.py):
# the proxy hook sourced for the training child (its `unset` names leave the wrapper's environment), the
# environment the child gets ($CACHE is the project's cache/ on the node, $HOME the box's home) and the
# interpreter for the wrapper and for a run that names none. An instance may override any of them.
PROXY_HOOK = {"source": Optional(str), "exports": MapOf(str), "unset": ListOf(str), "note": str}
HOOKS = {"proxy": Optional(PROXY_HOOK), "env": MapOf(str), "interpreter": Optional(str)}

# The eight sections of the seed's profile schema (plus free-form notes).
PROFILE_SCHEMA = {
    "identity": {
        "key": str,
        "name": str,
        "kind": Choice(("rental", "cloud", "ssh", "local")),
        "persistent": bool,
    },
    "network": {
        "ssh_user": Optional(str),
        "ssh_flavor": Choice(("direct", "proxied", "local")),
        "port_changes_on_restart": bool,
        "egress": str,
        "mirror_needed": bool,
    },
    "storage": {
        "data_root": str,
        "durable_root": Optional(str),
        "inode_cap": Optional(int),
        "shared_fs": Optional({"path": str, "region_locked": bool, "note": str}),
        # hot_root: a fast local disk for regenerable hot data (the cache, staged datasets) where the
        # data root is a slow or per-GB tier; omitted where the data root is the fast disk.
        "hot_root": Optional(str),
        # mount: the tier is a disk of its own mounted at its path; a data root there that measures on
        # another mount (a plain directory of the system disk) is not on the tier.
        "tiers": ListOf(
            {"name": str, "path": str, "survives": SURVIVES, "note": str, "mount": Optional(bool)}, min_items=1
        ),
    },
    "daemon": {
        "detach": Choice(("tmux", "nohup", "sbatch", "k8s-job", "onstart")),
        "fallback": str,
        "survives_restart": bool,
    },
    "billing": {
        "meter_stop_verb": str,
        "irreversible": bool,
        "stop_effect": str,
        "spot": {"available": bool, "grace_seconds": Optional(int), "mtbi_hours": Optional(int)},
        # A stopped box that the platform releases by itself after this many hours (a stop starts
        # the release clock, so a shutdown eventually loses what a release loses); null: never.
        "stopped_released_after_hours": Optional(int),
        # A stopped box still bills (vast.ai's disk, RunPod's volume at 2×, LanRui's data disk,
        # Paperspace's storage and IP): beat alarms a stop that lingers (delivery/waste.py).
        "stopped_bills": bool,
    },
    "surface": {
        "conveniences": ListOf(str),
        "danger_clocks": ListOf({"what": str, "clock": str}, min_items=1),
    },
    "teardown": {"shutdown": CONSEQUENCE, "release": CONSEQUENCE, "destroy": CONSEQUENCE},
    "hooks": HOOKS,
    "notes": ListOf(str),
}


def _type_name(spec) -> str:
    if isinstance(spec, type):
        return {str: "text", bool: "true/false", int: "an integer"}.get(spec, spec.__name__)
    if isinstance(spec, dict):
        return "a mapping"
    if isinstance(spec, ListOf | MapOf):
        return "a list" if isinstance(spec, ListOf) else "a mapping"
    return str(spec)


def validate(value, spec, file: str, path: str = "") -> None:
    """Raise ProfileError at the first value that does not match spec."""
    here = path or "(top)"
    if isinstance(spec, Optional):
        if value is not None:
            validate(value, spec.inner, file, path)
        return
    if isinstance(spec, Choice):
        if value not in spec.options:
            raise ProfileError(file, here, f"must be one of {', '.join(spec.options)} (got {value!r})")
        return
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ProfileError(file, here, "must be a list")
        if len(value) < spec.min_items:
            raise ProfileError(file, here, f"needs at least {spec.min_items} item(s)")
        for index, item in enumerate(value):
            validate(item, spec.inner, file, f"{path}[{index}]")
        return
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise ProfileError(file, here, "must be a mapping")
        for key, item in value.items():
            validate(item, spec.inner, file, f"{path}.{key}")
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise ProfileError(file, here, "must be a mapping")
        for key, inner in spec.items():
            child = f"{path}.{key}" if path else key
            if key not in value:
                if isinstance(inner, Optional) and key in OMITTABLE:
                    continue
                raise ProfileError(file, child, "is missing")
            validate(value[key], inner, file, child)
        unknown = sorted(set(value) - set(spec))
        if unknown:
            raise ProfileError(file, f"{path}.{unknown[0]}" if path else unknown[0], "is not a known field")
        return
    # bool is an int in Python: check bool-ness exactly in both directions.
    if spec is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ProfileError(file, here, f"must be {_type_name(spec)} (got {value!r})")
    if not isinstance(value, spec):
        raise ProfileError(file, here, f"must be {_type_name(spec)} (got {value!r})")
