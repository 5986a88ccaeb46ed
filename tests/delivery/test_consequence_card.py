"""A consequence card's "Data that dies" and the evidence model are one source: whatever the
evidence model says a shutdown or release destroys on the box, the card names, on every platform."""

import uuid

import pytest

from custody.copies import Copy
from delivery.evidence import Consequence as Planned
from delivery.evidence import destroys
from delivery.levels import consequence_of
from delivery.models import TeardownKind
from platforms.catalog import all_profiles
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("profile", [p for p in all_profiles() if not p.is_local], ids=lambda p: p.key)
@pytest.mark.parametrize("root", ["platform", "unknown"])
def test_the_card_names_every_disk_the_evidence_model_counts_lost(profile, root):
    slug = f"c{uuid.uuid4().hex[:8]}"
    project = factories.project(name=slug, slug=slug)
    box = factories.box(
        name=f"{slug}-box",
        project=project,
        profile_key=profile.key,
        host="203.0.113.7",
        user="root",
        shutdown_command="true",
        data_root_override="/srv/nowhere-known/runs" if root == "unknown" else "",
    )
    # Nothing measured on the box: its data root is the least-surviving reading, on the card as in the model.
    node_copy = Copy(1, "node", box.data_root, box.pk, box.measured_data_tier, "custody #1", "")
    for kind, verb in ((TeardownKind.SHUTDOWN, "shutdown"), (TeardownKind.RELEASE, "release")):
        card = consequence_of(kind, box)
        if card.not_offered:
            continue
        dies = destroys(Planned(kind, box.pk), node_copy, profile)
        named = any(box.measured_data_tier["name"] in item for item in card.data_lost)
        assert dies == named or (dies and verb == "shutdown" and card.clock), (kind, card.data_lost, dies)
