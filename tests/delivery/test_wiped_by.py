"""The one rule of what a consequence that has happened wiped (delivery.evidence.wiped_by), against what
one in flight counts as lost (destroys), on AutoDL's real profile: its data disk survives a stop, but
the 15-day clock a stop starts releases it."""

from custody.copies import Copy
from custody.models import EvidenceLocation
from delivery.evidence import Consequence, destroys, wiped_by
from delivery.models import TeardownKind
from platforms.catalog import get_profile

AUTODL = get_profile("autodl")
TIERS = {tier["name"]: tier for tier in AUTODL.tiers}


def copy_on(tier_name: str, instance_id: int = 7, gone: str = "") -> Copy:
    return Copy(1, EvidenceLocation.NODE, "/x", instance_id, TIERS[tier_name], "sha256", gone)


def test_a_stop_counts_the_data_disk_lost_but_wipes_only_what_a_stop_wipes():
    data_disk = next(
        name for name, tier in TIERS.items() if tier["survives"]["stop"] and not tier["survives"]["release"]
    )
    stop = Consequence(TeardownKind.SHUTDOWN, instance_id=7)
    assert destroys(stop, copy_on(data_disk), AUTODL)  # the release clock: lost while the box is stopped
    assert not wiped_by(stop, copy_on(data_disk), AUTODL)  # but still there after the stop itself


def test_a_release_wipes_what_release_loses_and_keeps_the_file_storage():
    release = Consequence(TeardownKind.RELEASE, instance_id=7)
    assert not wiped_by(release, copy_on("shared file storage"), AUTODL)
    lost = [name for name, tier in TIERS.items() if not tier["survives"]["release"]]
    assert lost and all(wiped_by(release, copy_on(name), AUTODL) for name in lost)


def test_nothing_is_wiped_twice_or_on_another_box():
    release = Consequence(TeardownKind.RELEASE, instance_id=7)
    lost = next(name for name, tier in TIERS.items() if not tier["survives"]["release"])
    assert not wiped_by(release, copy_on(lost, gone="deleted 2026-12-01 10:00"), AUTODL)
    assert not wiped_by(release, copy_on(lost, instance_id=8), AUTODL)
