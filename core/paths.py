"""Paths on the control host that must stay inside configured roots (sources, datasets)."""

from pathlib import Path


class OutsideRoots(ValueError):
    """The path resolves outside every allowed root, or is not a directory."""


def confined_directory(path: str, roots: list[Path]) -> Path:
    """The resolved directory, if it lies inside one of roots (links resolved first: no way out)."""
    resolved = Path(path).expanduser().resolve()
    allowed = [Path(root).resolve() for root in roots]
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed):
        raise OutsideRoots(f"{resolved} is outside the allowed roots ({', '.join(str(root) for root in allowed)}).")
    if not resolved.is_dir():
        raise OutsideRoots(f"{resolved} is not a directory on the control host.")
    return resolved
