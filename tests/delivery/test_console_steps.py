"""A shutdown told the operator to release. `console_steps` worded every shutdown with the
profile's composite meter-stop verb: Gpushare "shut down (关机), then release (释放)", LanRui "stop, then
destroy the data disk", vast.ai "destroy", RunPod and Lambda "terminate", Matpool "stop and release",
while the evidence check counted what a stop keeps. Each consequence now has its own verb."""

import pytest

from delivery.actions.base import TeardownRefused
from delivery.actions.requests import do_file_teardown
from delivery.levels import consequence_of
from fleet.provider_calls import console_steps
from platforms.catalog import all_profiles
from tests import factories
from tests.personas import join

pytestmark = pytest.mark.django_db

BEYOND_A_STOP = ("release", "destroy", "terminate", "return", "delete", "释放", "销毁", "归还")


@pytest.fixture
def project():
    return factories.project(name="Steps", slug="steps")


@pytest.mark.parametrize("profile", sorted(all_profiles(), key=lambda p: p.key), ids=lambda p: p.key)
def test_each_consequence_is_worded_with_its_own_verb(project, profile, bob):
    box = factories.box(
        name=f"steps-{profile.key}-20261201",
        project=project,
        profile_key=profile.key,
        host="203.0.113.9",
        user="root",
        provider_id="box-1",
        shutdown_command="true",
    )
    shutdown = consequence_of("shutdown", box)
    if profile.data["teardown"]["shutdown"]["via"] == "none":
        assert shutdown.not_offered  # no stop that keeps the box: the shutdown is not offered at all
    else:
        steps = " ".join(console_steps(box, "shutdown")).lower()
        assert profile.data["teardown"]["shutdown"]["verb"].lower() in steps
        assert not [word for word in BEYOND_A_STOP if word in steps], steps
        # What the check counts for a stop is what the profile says a stop keeps: never more lost
        # than a release loses.
        lost_on_stop = {tier["name"] for tier in profile.tiers_lost_on("stop")}
        lost_on_release = {tier["name"] for tier in profile.tiers if profile.loses(tier, "release")}
        assert lost_on_stop <= lost_on_release
    if profile.data["teardown"]["release"]["via"] == "none":
        # Nothing to release (the local workstation): not offered, never a console step nobody can take
        # ("choose 'not offered (this machine)' and attest" once sat on a request page).
        assert consequence_of("release", box).not_offered
        with pytest.raises(TeardownRefused, match="nothing to release"):
            join(project, bob)
            do_file_teardown(box.pk, "release", "done with it", actor=bob)
    else:
        release = " ".join(console_steps(box, "release"))
        assert profile.data["teardown"]["release"]["verb"] in release
