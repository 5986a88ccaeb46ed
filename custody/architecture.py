"""Does the checkpoint hold the network the config describes?

The training declares, in run.json, each parameter's shape in terms of config keys
(`"architecture": {"0.weight": ["hidden", "features"], "0.bias": ["hidden"]}`). Readback resolves
those names against the export's config.yaml and compares them with the tensors actually in the
checkpoint: a checkpoint from another config, or a config edited after training, fails closed.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchitectureCheck:
    checked: bool
    ok: bool
    detail: str


def state_dict_of(state) -> dict:
    """The tensors of a checkpoint: a bare state dict, or one under "model" / "state_dict"."""
    import torch  # here, not at the top: see custody.checkpoint.safe_load

    if isinstance(state, dict):
        for key in ("model", "state_dict"):
            if isinstance(state.get(key), dict):
                return state[key]
        return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    return {}


def _resolve(dims, config: dict) -> list[int] | str:
    shape = []
    for dim in dims:
        if isinstance(dim, bool) or not isinstance(dim, int | str):
            return f"dimension {dim!r} is neither a number nor a config key"
        if isinstance(dim, str):
            if not isinstance(config.get(dim), int):
                return f"config has no integer {dim!r}"
            dim = config[dim]
        shape.append(dim)
    return shape


def check_architecture(state, config: dict | None, declared) -> ArchitectureCheck:
    if not declared:
        return ArchitectureCheck(False, True, "run.json declares no architecture: checkpoint↔config not checked")
    if not isinstance(declared, dict) or not isinstance(config, dict):
        return ArchitectureCheck(True, False, "run.json architecture or config.yaml is not a mapping")
    tensors = state_dict_of(state)
    problems = []
    for name, dims in sorted(declared.items()):
        expected = _resolve(dims if isinstance(dims, list) else [dims], config)
        if isinstance(expected, str):
            problems.append(f"{name}: {expected}")
        elif name not in tensors:
            problems.append(f"{name}: missing from the checkpoint")
        elif list(tensors[name].shape) != expected:
            problems.append(f"{name}: checkpoint {list(tensors[name].shape)}, config says {expected}")
    if problems:
        return ArchitectureCheck(True, False, "; ".join(problems[:5]))
    return ArchitectureCheck(True, True, f"{len(declared)} parameter shapes match config.yaml")
