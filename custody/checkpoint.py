"""Safe checkpoint loading: tensors and plain containers only; a pickle payload is refused unrun."""

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class LoadResult:
    ok: bool
    detail: str
    keys: tuple[str, ...] = ()
    state: object = field(default=None, repr=False, compare=False)


def safe_load(path) -> LoadResult:
    """torch.load(weights_only=True): the unpickler refuses any global it does not allow."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # UnpicklingError, RuntimeError, EOFError … all mean "do not trust it"
        return LoadResult(False, f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    keys = tuple(sorted(state)) if isinstance(state, dict) else ()
    return LoadResult(True, f"loaded {type(state).__name__} with {len(keys)} key(s)", keys, state)
