"""Where a run lives on its node: `<data root>/<project>/{active,export,quarantine}/…` (DOMAIN §2.5)."""

import posixpath
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class NodeLayout:
    """All paths absolute: $HOME is resolved on the node before a layout is built."""

    data_root: str
    project_slug: str
    run_id: str
    node_source: str = ""  # a source directory already on the node, if any
    hardware: bool = False  # a hardware capsule seals apart: export/hardware/, quarantine/hardware/
    hot_root: str = ""  # the platform's fast local disk for regenerable hot data (Gpushare's /hy-tmp), if any

    @property
    def run_root(self) -> str:
        return posixpath.join(self.data_root, self.project_slug)

    @property
    def active(self) -> str:
        return posixpath.join(self.run_root, "active", self.run_id)

    @property
    def src(self) -> str:
        return self.node_source or posixpath.join(self.active, "src")

    @property
    def ckpt(self) -> str:
        return posixpath.join(self.active, "ckpt")

    @property
    def ckpt_outbox(self) -> str:
        """Where the wrapper holds the newest checkpoint for the control host to pull (no durable tier)."""
        return posixpath.join(self.active, "ckpt-outbox")

    @property
    def ckpt_inbox(self) -> str:
        """Where the control host uploads its checkpoint copies for a continued attempt to restore."""
        return posixpath.join(self.active, "ckpt-inbox")

    @property
    def output(self) -> str:
        return posixpath.join(self.active, "output")

    @property
    def _kind(self) -> tuple[str, ...]:
        return ("hardware",) if self.hardware else ()

    @property
    def partial(self) -> str:
        return posixpath.join(self.run_root, "export", ".partial", *self._kind, self.run_id)

    @property
    def export(self) -> str:
        return posixpath.join(self.run_root, "export", *self._kind, self.run_id)

    @property
    def quarantine_base(self) -> str:
        return posixpath.join(self.run_root, "quarantine", *self._kind)

    def quarantine(self, attempt: int) -> str:
        return posixpath.join(self.quarantine_base, f"{self.run_id}--{attempt}")

    @property
    def cache(self) -> str:
        """The project's regenerable cache on this node (HF_HOME, pip, staged datasets): never evidence. On
        the platform's fast local disk where it has one: a data root on a slow per-GB netdisk (Gpushare)
        would bill every staged byte and feed the GPU from the network."""
        if self.hot_root:
            return posixpath.join(self.hot_root, "remotegpu-cache", self.project_slug)
        return posixpath.join(self.run_root, "cache")

    @property
    def tools(self) -> str:
        return posixpath.join(self.run_root, ".remotegpu")

    def spec(self, name: str) -> str:
        return posixpath.join(self.active, f"spec-{name}.json")

    def under_src(self, relative: str) -> str:
        return posixpath.normpath(posixpath.join(self.src, relative))

    def as_dict(self) -> dict:
        keys = ["run_root", "active", "src", "ckpt", "output", "partial", "export", "quarantine_base", "cache"]
        return {key: getattr(self, key) for key in keys}


def resolve_home(path: str, home: str) -> str:
    for prefix in ("$HOME", "~"):
        if path == prefix:
            return home
        if path.startswith(prefix + "/"):
            return posixpath.join(home, path[len(prefix) + 1 :])
    return path


def layout_for(run) -> NodeLayout:
    """The layout as configured (with $HOME unresolved): what the run page shows."""
    node_source = run.source_path if run.source_kind == "node_path" else ""
    instance = run.instance
    return NodeLayout(
        instance.data_root, run.project.slug, run.run_id, node_source, is_hardware(run), instance.hot_root
    )


def is_hardware(run) -> bool:
    """Whether the run seals a hardware capsule (runs.models.Capsule.HARDWARE)."""
    return getattr(run, "capsule", "software") == "hardware"


def node_path_problem(path: str) -> str | None:
    """Node paths are absolute (or $HOME/…), with no '..' and no control characters."""
    if any(ord(char) < 32 for char in path):
        return "Paths may not contain control characters or newlines."
    if not (path.startswith("/") or path == "$HOME" or path.startswith(("$HOME/", "~/"))):
        return f"{path!r}: node paths must be absolute or start with $HOME/."
    if ".." in PurePosixPath(path).parts:
        return f"{path!r}: '..' is not allowed in node paths."
    return None
