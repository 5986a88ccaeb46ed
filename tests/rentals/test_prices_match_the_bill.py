"""The rate a rent approves is at least what the provider's documented price for the created resources is,
per provider, for a run with a 500 GB disk: asked through each stand-in (which prices as the provider's
document says) and the adapter's own search, the offer's rate against the bill's sum. Before: vast.ai's
dph_total was asked for its default 8 GB of disk; RunPod's rate left out the container disk."""

import pytest

from fleet.renting import find_offers
from providers.interface import HOURS_PER_MONTH
from providers.offers import Need
from tests.provider_stub import api_credential
from tests.provider_stubs import lambdalabs
from tests.provider_stubs.vastai import offer as vast_offer
from tests.rentals.test_offers import gpu_type

pytestmark = pytest.mark.django_db
DISK = 500


def test_vast_rate_is_dph_total_for_the_disk_created(project, provider_api):
    """vast.ai: dph_total is priced for allocated_storage GB; the stand-in prices an offer of $0.50/h at
    8 GB with its disk at $0.15/GB/month. Created with 500 GB, the bill is 0.50 + 0.15 × 492 / 730."""
    provider_api.offers["vastai"] = [vast_offer(701, "RTX_4090", 24564, 0.50)]
    (offer,) = find_offers("vastai", api_credential(project), Need(("RTX 4090",), 1, 24, DISK, 2.0))
    billed = 0.50 + 0.15 * (DISK - 8) / HOURS_PER_MONTH
    assert offer.rate >= round(billed, 6) and abs(offer.rate - billed) < 1e-4, (offer.rate, billed)
    assert offer.rate_stopped == round(0.15 * DISK / HOURS_PER_MONTH, 4)  # stopped, the disk alone bills
    print(f"\nvast.ai 500 GB: approved ${offer.rate:.4f}/h (was $0.5000 at 8 GB), stopped ${offer.rate_stopped}/h")


def test_runpod_rate_is_the_gpus_and_the_container_disk(project, provider_api):
    """RunPod (pods/pricing.mdx): GPU price × count, and the container disk at $0.10/GB/month while running;
    stopped, the container disk is not charged (no volume disk is created)."""
    provider_api.offers["runpod"] = [gpu_type("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.44, "HIGH")]
    (offer,) = find_offers("runpod", api_credential(project), Need(("RTX 4090",), 2, 24, DISK, 5.0))
    billed = 0.44 * 2 + DISK * 0.10 / HOURS_PER_MONTH
    assert offer.rate >= round(billed, 4) and offer.rate_stopped == 0.0, (offer.rate, billed)
    print(f"\nrunpod 2× 500 GB: approved ${offer.rate:.4f}/h (was $0.8800)")


def test_lambda_rate_is_the_instance_types_price(project, provider_api):
    """Lambda: price_cents_per_hour is the instance's, its local disk included; it cannot be stopped."""
    provider_api.offers["lambda"] = {
        "gpu_1x_a100": lambdalabs.instance_type("gpu_1x_a100", "A100 (40 GB PCIe)", 129, ["us-east-1"])
    }
    (offer,) = find_offers("lambda", api_credential(project), Need(("A100",), 1, 40, DISK, 5.0))
    assert (offer.rate, offer.rate_stopped) == (1.29, 0.0)
