"""Renting, as data: what a run needs, what a provider offers, which offer fits. Pure: no HTTP here
(fleet/renting.py sends the calls); what each provider's answers and create call look like is its
adapter's, in providers/<name>/renting.py.

Sources: ../shared/reference/profiles/vastai.md §1 (offer search, then create onto the offer: PUT
/asks/{id}/), lambda.md §1 (GET /instance-types with regions_with_capacity_available, POST
/instance-operations/launch; "insufficient capacity" is the real failure), runpod.md §1 (the GPU catalogue
with its on-demand price and stock is GraphQL's gpuTypes; the pod is created by REST POST /v1/pods).
An offer is untrusted input: a field we cannot read makes the offer unusable, never a default.
"""

import math
import re
from dataclasses import dataclass, field

# The GPU models a request may name (tokens as people write them). Anything else is refused before a
# provider is asked: "A1OO" must not match nothing quietly, or everything.
KNOWN_GPUS = (
    "B200",
    "H200",
    "H100",
    "GH200",
    "A100",
    "A800",
    "H800",
    "L40S",
    "L40",
    "L4",
    "A40",
    "A10",
    "A6000",
    "A5000",
    "A4000",
    "RTX 6000 ADA",
    "RTX 5090",
    "RTX 4090",
    "RTX 4080",
    "RTX 3090",
    "RTX 3080",
    "V100",
    "T4",
)


def tokens(name: str) -> tuple[str, ...]:
    """A GPU name as comparable words: "NVIDIA GeForce RTX 4090" → ("RTX", "4090"); "A100-SXM4" → ("A100", "SXM4")."""
    words = re.findall(r"[A-Za-z0-9]+", name.upper())
    return tuple(word for word in words if word not in ("NVIDIA", "GEFORCE", "TESLA"))


def known_gpu(name: str) -> str | None:
    """The catalogue's spelling of a requested model, or None when it names no GPU we know."""
    wanted = tokens(name)
    for known in KNOWN_GPUS:
        if tokens(known) == wanted:
            return known
    return None


@dataclass(frozen=True)
class Need:
    gpu_models: tuple[str, ...]  # any of these (catalogue spellings)
    gpu_count: int
    gpu_memory_gb: int  # at least, per GPU
    disk_gb: int
    max_rate: float  # $/h for the whole box
    region: str = ""  # only offers in this region (blank: any): a durable tier is region-locked
    volume: str = ""  # the provider volume or filesystem the create attaches for the durable tier


@dataclass(frozen=True)
class Offer:
    provider: str
    offer_id: str  # vast.ai's ask id; Lambda's instance type name
    gpu_name: str
    gpu_count: int
    gpu_memory_gb: float
    rate: float  # $/h for the whole box as created (its GPUs and the disk the create asks)
    region: str = ""
    extra: dict = field(default_factory=dict, compare=False)
    rate_stopped: float = 0.0  # $/h it still bills while stopped (its disk), as the provider prices it

    def describe(self) -> str:
        where = f" in {self.region}" if self.region else ""
        return f"{self.gpu_count}× {self.gpu_name} ({self.gpu_memory_gb:g} GB) at ${self.rate:.4f}/h{where}"


def model_matches(model: str, gpu_name: str) -> bool:
    """The requested model's words in order at the start of the offer's GPU words ("A100" fits "A100 SXM4",
    "RTX 4090" fits "RTX 4090 D", "L40" does not fit "L40S")."""
    want, have = tokens(model), tokens(gpu_name)
    return len(have) >= len(want) and have[: len(want)] == want


def fits(need: Need, offer: Offer) -> bool:
    return (
        any(model_matches(model, offer.gpu_name) for model in need.gpu_models)
        and offer.gpu_count == need.gpu_count
        and offer.gpu_memory_gb + 0.5 >= need.gpu_memory_gb  # a "24 GB" card reports 23.99
        and (not need.region or offer.region.lower() == need.region.lower())
    )


def choose(need: Need, offers: list[Offer]) -> tuple[Offer | None, Offer | None]:
    """(the cheapest fitting offer at or under the max rate, the cheapest fitting offer over it)."""
    fitting = sorted((offer for offer in offers if fits(need, offer)), key=lambda offer: (offer.rate, offer.offer_id))
    under = [offer for offer in fitting if offer.rate <= need.max_rate]
    over = [offer for offer in fitting if offer.rate > need.max_rate]
    return (under[0] if under else None), (over[0] if over else None)


def number_in(value, low=0.0, high=1e9) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and low <= value <= high else None


def count_in(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 64 else None


@dataclass(frozen=True)
class Create:
    method: str
    path: str
    body: dict
