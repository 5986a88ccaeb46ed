"""What a rent request must be before it is asked: pure checks (no HTTP, no Celery) with a clear reason
each, so bad input is refused before anything is created or anyone is asked to approve it."""

import hashlib
import json
import re
from decimal import Decimal

from providers import RENTABLE, renting_of
from providers.offers import KNOWN_GPUS, Need, known_gpu

CENT = Decimal("0.01")


def read_models(text: str) -> list[str]:
    """ "A100, H100" → the catalogue's spellings; ValueError naming the model we do not know."""
    names = [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]
    if not names:
        raise ValueError("Name at least one GPU model.")
    models = []
    for name in names:
        known = known_gpu(name)
        if known is None:
            raise ValueError(f"“{name[:40]}” is not a GPU model we know; known: {', '.join(KNOWN_GPUS)}.")
        if known not in models:
            models.append(known)
    return models


def read_candidates(text: str, granted: dict[str, int]) -> list[str]:
    """ "lambda, vastai" → the order they are asked in; ValueError for a platform we cannot rent on or one
    without a provider API key granted to the project (refused here, not when the worker gets to it)."""
    names = [part.strip().lower() for part in text.replace(";", ",").split(",") if part.strip()]
    if not names:
        raise ValueError("Name at least one candidate provider.")
    for name in names:
        if name not in RENTABLE:
            raise ValueError(f"“{name[:40]}” cannot be rented here; candidates: {', '.join(RENTABLE)}.")
        if name not in granted:
            raise ValueError(f"No provider API key for {name} is granted to this project: ask an administrator.")
    if len(set(names)) != len(names):
        raise ValueError("Each candidate once.")
    return names


# An image reference: [registry/]name[:tag][@sha256:<64 hex>] (what docker pulls; nothing a shell reads).
IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]{0,190}(@sha256:[0-9a-f]{64})?")


def read_image(text: str) -> str:
    """The rent's image, as the create call sends it; ValueError for anything that is not one."""
    image = text.strip()
    if not IMAGE.fullmatch(image) or "//" in image or image.count("@") > 1:
        raise ValueError("An image is [registry/]name[:tag], pinned as name@sha256:<digest> (lowercase).")
    return image


VOLUME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def read_volume(text: str, candidates: list[str]) -> str:
    """The volume or filesystem a rent attaches ("" for none); ValueError for a malformed name or a
    candidate whose create call attaches none here."""
    volume = text.strip()
    if not volume:
        return ""
    if not VOLUME.fullmatch(volume):
        raise ValueError("A volume is its id or name: letters, digits, '.', '_' and '-'.")
    without = [name for name in candidates if not renting_of(name).volumes]
    if without:
        raise ValueError(f"{', '.join(without)} cannot attach a volume at create here: drop it from the candidates.")
    if len(candidates) > 1:
        raise ValueError("A volume belongs to one provider: name only that provider as the candidate.")
    return volume


# What a run's proof proves: what it runs and from what. A change to any of these after the proof (an
# edit of the draft) is not proven, and its rent is proven again before it is approved.
PROVEN_FIELDS = (
    "source_kind",
    "source_path",
    "source_commit",
    "command",
    "config_path",
    "config_overrides",
    "environment",
    "data_paths",
    "datasets",
    "manifest_path",
    "secrets_in_smoke",
)


def run_signature(run) -> str:
    """One hash of what the proof of run proves (PROVEN_FIELDS)."""
    fields = {name: getattr(run, name) for name in PROVEN_FIELDS}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def volume_size_problem(volume: str, gb: int, region: str) -> None:
    """ValueError when a volume to create is not named or has no region to be created in (a volume is of
    one region or data centre: the box lands beside it). Its size's bound is the form field's."""
    if not gb:
        return
    if not volume:
        raise ValueError("Name the volume to create.")
    if not region:
        raise ValueError("A volume is created in a region: name the rent's region.")


def expected_cost(max_rate: Decimal, minutes: int) -> Decimal:
    """The most the run's expected minutes cost at the highest rate the rent accepts."""
    return (max_rate * Decimal(minutes) / 60).quantize(CENT)


def spend_note(cost: Decimal, threshold: Decimal | None, left: Decimal | None) -> str:
    """What the project's spend rules say of this cost (a rent waits for an approver either way)."""
    said = []
    if threshold is not None and cost > threshold:
        said.append(f"above the per-run threshold of ${threshold}")
    if left is not None and cost > left:
        said.append(f"above the ${left} left in the envelope")
    if said:
        return "; ".join(said)
    return "within the project's envelope and threshold" if (threshold, left) != (None, None) else "no envelope set"


def need_of(rental) -> Need:
    return Need(
        tuple(rental.gpu_models),
        rental.gpu_count,
        rental.gpu_memory_gb,
        rental.disk_gb,
        float(rental.max_rate),
        rental.region,
        volume_of(rental),
    )


def volume_of(rental) -> str:
    """How the box's create names the rent's volume: its provider id (RunPod) or its name (Lambda)."""
    if not rental.durable_volume:
        return ""
    known = rental.volume or {}
    key = "name" if renting_of(rental.candidates[0]).volume_ref == "name" else "id"
    return str(known.get(key) or rental.durable_volume)
