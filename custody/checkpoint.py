"""Safe checkpoint loading: tensors and plain containers only; a pickle payload is refused unrun."""

import os
import zipfile
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LoadResult:
    ok: bool
    detail: str
    keys: tuple[str, ...] = ()
    state: object = field(default=None, repr=False, compare=False)


# torch.save stores its zip members uncompressed: a member that inflates is not one of ours, and a
# 1 MiB "checkpoint" once loaded as a 1 GiB tensor. Anything beyond this many bytes per stored byte
# (plus a small allowance) is refused before torch reads it.
INFLATION_LIMIT, INFLATION_ALLOWANCE = 1.5, 1 << 20


def inflation_problem(path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError):
        return None  # not a zip (a legacy checkpoint): torch.load decides
    stored = os.path.getsize(path)
    if expanded > INFLATION_LIMIT * stored + INFLATION_ALLOWANCE:
        return f"refused: its members expand to {expanded} bytes from {stored} on disk (a zip bomb?)"
    return None


def safe_load(path) -> LoadResult:
    """torch.load(weights_only=True): the unpickler refuses any global it does not allow."""
    problem = inflation_problem(path)
    if problem:
        return LoadResult(False, problem)
    # Imported on the first readback, not when custody is: torch's import is seconds of CPU that every
    # web process and every worker start would pay, most of which never load a checkpoint.
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError, EOFError … all mean "do not trust it"
        return LoadResult(False, f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    keys = tuple(sorted(state)) if isinstance(state, dict) else ()
    return LoadResult(True, f"loaded {type(state).__name__} with {len(keys)} key(s)", keys, state)
