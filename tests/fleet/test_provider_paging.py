"""Every list read to its end (fleet/provider_calls.listed): vast.ai's v1 instances in keyset pages of at most
25 (its show_instances file), Paperspace's v1 lists by hasMore/nextPage, with a bound and a named failure
past it. Before: one page each, so a box past it was invisible to drift and to the create-once look-up."""

import pytest

from fleet import provider_calls
from providers.http import ProviderError
from providers.interface import RUNNING
from tests.provider_stub import api_credential
from tests.provider_stubs import paperspace

pytestmark = pytest.mark.django_db


def test_sixty_vast_boxes_are_read_over_three_pages_each_row_stripped(project, provider_api):
    for number in range(60):
        provider_api.add("vastai", str(9000 + number))
    provider_api.endpoints["9059"] = (" 198.51.100.7\n", 41022)  # padded, as vast's rows are (its SDK strips)
    provider_api.names["9059"] = "p-train-r9-20261207 "
    listing = provider_calls.list_boxes("vastai", api_credential(project))
    assert sorted(listing.inventory) == [str(9000 + number) for number in range(60)]
    assert set(listing.inventory.values()) == {RUNNING}
    assert listing.endpoints["9059"] == ("198.51.100.7", 41022) and listing.names["9059"] == "p-train-r9-20261207"
    pages = [r for r in provider_api.requests if r["path"] == "/api/v1/instances/"]
    assert len(pages) == 3  # 25 + 25 + 10, each asked after the last one's token
    assert not [r for r in provider_api.requests if r["path"] == "/api/v0/instances/"]


def test_a_list_that_never_ends_is_a_named_failure_not_an_inventory_cut_short(project, provider_api):
    provider_api.add("vastai", "9100")
    provider_api.endless.add("vastai")
    with pytest.raises(ProviderError, match=r"vastai's list call did not end after 400 pages"):
        provider_calls.list_boxes("vastai", api_credential(project))


def test_paperspace_machines_are_read_past_their_first_page(project, provider_api):
    for number in range(45):
        provider_api.add("paperspace", f"ps{number:03d}")
    listing = provider_calls.list_boxes("paperspace", api_credential(project))
    assert sorted(listing.inventory) == [f"ps{number:03d}" for number in range(45)]
    assert len([r for r in provider_api.requests if r["path"] == "/v1/machines"]) == 3  # 20 + 20 + 5


def test_paperspace_snapshots_and_shared_drives_are_read_past_their_first_page(project, provider_api):
    """Every v1 list pages as its machines do: 45 snapshots and 21 shared drives, each read to its end."""
    provider_api.volumes["paperspace-snapshots"] = [paperspace.snapshot(f"snap-{n:02d}", f"s{n}") for n in range(45)]
    provider_api.volumes["paperspace-shared_drives"] = [
        paperspace.shared_drive(f"sd-{n:02d}", f"drive{n}", "pw") for n in range(21)
    ]
    found = provider_calls.list_other_resources("paperspace", api_credential(project))
    assert sorted(found["snapshot"]) == [f"snap-{n:02d}" for n in range(45)]
    assert sorted(found["shared_drive"]) == [f"sd-{n:02d}" for n in range(21)]
    assert len([r for r in provider_api.requests if r["path"] == "/v1/snapshots"]) == 3  # 20 + 20 + 5
    assert len([r for r in provider_api.requests if r["path"] == "/v1/shared-drives"]) == 2
