"""What runs is what was rented: the box's GPUs as nvidia-smi measured them at preflight, against what
the money was spent on (the rent's offer) or, for a box registered by hand, what its page declares.
Pure: no database, no node. A mismatch fails the preflight closed; an approver may accept the very
mismatch measured (audited), and a different one later fails again.

A driver, toolkit and torch mismatch is named as the cause when CUDA is unavailable: a box whose
nvidia-smi lists GPUs but whose torch cannot use them is almost always one of three things, and the
run's owner needs to know which.
"""

import re
from dataclasses import dataclass

from providers.offers import KNOWN_GPUS, model_matches, tokens


@dataclass(frozen=True)
class Declared:
    model: str
    count: int | None
    memory_gb: float | None
    by: str  # what declared it: "rent #12's offer", "the box's page"


def from_offer(offer: dict, rental_pk: int) -> Declared | None:
    name = offer.get("gpu_name")
    if not isinstance(name, str) or not name:
        return None
    count = offer.get("gpu_count") if isinstance(offer.get("gpu_count"), int) else None
    memory = offer.get("gpu_memory_gb") if isinstance(offer.get("gpu_memory_gb"), int | float) else None
    return Declared(name, count, memory, f"rent #{rental_pk}'s offer")


def from_description(text: str) -> Declared | None:
    """ "2× RTX 4090 (24 GB)" → the model we know, its count and memory; None when it names no known model."""
    words = tokens(text or "")
    model = next((known for known in KNOWN_GPUS if _contains(words, tokens(known))), None)
    if model is None:
        return None
    count = re.search(r"([0-9]+)\s*[x×]", text)
    memory = re.search(r"([0-9]+)\s*G[Bi]", text)
    return Declared(
        model, int(count.group(1)) if count else None, float(memory.group(1)) if memory else None, "the box's page"
    )


def _contains(words: tuple, wanted: tuple) -> bool:
    return any(words[i : i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


def measured_gpus(inventory) -> list[dict]:
    """The inventory's GPUs, only entries of the expected shape (an untrusted box), at most 64."""
    gpus = inventory.get("gpus") if isinstance(inventory, dict) else None
    if not isinstance(gpus, list):
        return []
    ok = [
        gpu
        for gpu in gpus[:64]
        if isinstance(gpu, dict) and isinstance(gpu.get("name"), str) and isinstance(gpu.get("memory_mib"), int)
    ]
    return [{"name": gpu["name"][:100], "memory_mib": gpu["memory_mib"]} for gpu in ok]


def signature(gpus: list[dict]) -> str:
    """What was measured, in one line: what an acceptance is bound to."""
    return "; ".join(f"{gpu['name']} {gpu['memory_mib']} MiB" for gpu in gpus)


def mismatch(declared: Declared | None, inventory) -> str | None:
    """How the measured GPUs differ from the declaration, or None (nothing declared, nothing measured)."""
    gpus = measured_gpus(inventory)
    if declared is None or inventory is None:
        return None
    said = []
    if declared.count is not None and len(gpus) != declared.count:
        said.append(f"{len(gpus)} GPU(s), not {declared.count}")
    other = sorted({gpu["name"] for gpu in gpus if not model_matches(declared.model, gpu["name"])})
    if other:
        said.append(f"{', '.join(other)}, not {declared.model}")
    if declared.memory_gb:
        small = [gpu for gpu in gpus if gpu["memory_mib"] / 1024 + 1 < declared.memory_gb]
        if small:
            said.append(f"{small[0]['memory_mib'] / 1024:.0f} GB per GPU, not {declared.memory_gb:g} GB")
    return "; ".join(said) or None


def hardware_problems(declared: Declared | None, inventory, accepted: dict | None) -> list[str]:
    """The preflight's refusal when what runs is not what was rented (unless this very mismatch was
    accepted by an approver)."""
    differs = mismatch(declared, inventory)
    if differs is None:
        return []
    if accepted and accepted.get("measured") == signature(measured_gpus(inventory)):
        return []
    return [
        f"The box's GPUs are not what {declared.by} said: nvidia-smi measures {differs}. It bills as rented: "
        "release it and rent again, or ask an approver to accept this box as it is."
    ]


def cuda_cause(environment: dict, inventory) -> str:
    """Why CUDA is unavailable to the run's torch on a box whose nvidia-smi lists GPUs: "" if unknown."""
    if not measured_gpus(inventory):
        return ""
    torch, built = environment.get("torch") or "", environment.get("cuda") or ""
    driver_cuda = str(inventory.get("cuda") or "")
    driver = f"driver {inventory.get('driver') or '?'} (CUDA {driver_cuda or '?'})"
    if torch and not built:
        return f" The cause: torch {torch} is a CPU build, while the box's {driver} has GPUs: install a CUDA build."
    if built and driver_cuda and _version(built) > _version(driver_cuda):
        return (
            f" The cause: torch {torch} was built for CUDA {built}, newer than the box's {driver} supports: "
            f"install torch for CUDA {driver_cuda} or lower, or rent a box with a newer driver."
        )
    return ""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", text)[:3])
