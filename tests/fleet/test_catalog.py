"""Platform profiles are validated data: every platform loads; a broken file is a clear start-up error."""

import html
import shutil
import subprocess
import sys

import pytest
import yaml

from platforms.catalog import all_profiles, get_profile, load_catalog
from platforms.schema import ProfileError
from tests import factories
from tests.conftest import REPO, subprocess_env
from tests.personas import join

PLATFORMS = REPO / "platforms" / "profiles"
REQUIRED = {
    "autodl",
    "matpool",
    "gpushare",
    "featurize",
    "lanrui",
    "runpod",
    "vastai",
    "lambda",
    "paperspace",
    "generic-ssh",
    "local",
    "slurm",  # a cluster's login node (issue 50)
}


def test_every_platform_of_the_design_is_loaded():
    assert {profile.key for profile in all_profiles()} == REQUIRED


def test_china_family_rows_share_one_file_and_inherit_defaults():
    gpushare = get_profile("gpushare")
    assert gpushare.source == "china-family.yaml"
    assert gpushare.data["network"]["mirror_needed"] is True
    assert gpushare.data_root == "/hy-netdisk"


def test_survival_matrix_says_what_a_stop_loses():
    assert [tier["name"] for tier in get_profile("runpod").tiers_lost_on("stop")] == ["container disk"]
    assert [tier["name"] for tier in get_profile("gpushare").tiers_lost_on("stop")] == ["system disk", "data disk"]
    assert get_profile("autodl").tiers_lost_on("stop") == []
    assert [tier["name"] for tier in get_profile("autodl").tiers_lost_on("release")] == ["system disk", "data disk"]


def test_platform_facts_from_the_domain():
    assert get_profile("lambda").default_user == "ubuntu"
    assert get_profile("vastai").durable_root is None
    assert get_profile("autodl").data["storage"]["inode_cap"] == 200000
    assert "Slurm" in " ".join(get_profile("generic-ssh").data["notes"])
    assert "Kubernetes" in " ".join(get_profile("generic-ssh").data["notes"])


def broken_copy(tmp_path, file, mutate):
    directory = tmp_path / "platforms"
    shutil.copytree(PLATFORMS, directory)
    document = yaml.safe_load((directory / file).read_text())
    mutate(document)
    (directory / file).write_text(yaml.safe_dump(document, allow_unicode=True))
    return directory


@pytest.mark.parametrize(
    ("file", "mutate", "field", "problem"),
    [
        ("runpod.yaml", lambda d: d["storage"].pop("data_root"), "storage.data_root", "is missing"),
        ("lambda.yaml", lambda d: d["billing"].update(irreversible="yes"), "billing.irreversible", "true/false"),
        ("autodl.yaml", lambda d: d["daemon"].update(detach="screen"), "daemon.detach", "must be one of"),
        ("vastai.yaml", lambda d: d["storage"]["tiers"][0]["survives"].pop("destroy"), "survives.destroy", "missing"),
        ("local.yaml", lambda d: d["identity"].update(colour="red"), "identity.colour", "not a known field"),
        (
            "china-family.yaml",
            lambda d: d["platforms"]["lanrui"]["storage"].pop("tiers"),
            "storage.tiers",
            "is missing",
        ),
    ],
)
def test_broken_profile_names_file_and_field(tmp_path, file, mutate, field, problem):
    directory = broken_copy(tmp_path, file, mutate)
    with pytest.raises(ProfileError) as caught:
        load_catalog(directory)
    message = str(caught.value)
    assert message.startswith(file)
    assert field in message
    assert problem in message


def test_duplicate_key_is_refused(tmp_path):
    directory = broken_copy(tmp_path, "lambda.yaml", lambda d: d["identity"].update(key="runpod"))
    with pytest.raises(ProfileError, match="already defined"):
        load_catalog(directory)


def test_broken_profile_stops_start_up_with_one_clear_line(tmp_path):
    directory = broken_copy(tmp_path, "runpod.yaml", lambda d: d["storage"].pop("data_root"))
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=subprocess_env(REMOTEGPU_PROFILES_DIR=str(directory)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Broken platform profile: runpod.yaml: storage.data_root: is missing" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("key", ["runpod", "vastai", "lambda", "paperspace"])
def test_a_release_that_deletes_the_machine_loses_the_machines_own_disk(key):
    """The adapter's release verb and the survival matrix say the same thing: a DELETE or terminate of
    the machine takes the disk the runs write to with it, and the panel must say so (found when
    Paperspace's release deleted the machine while its block disk was said to survive)."""
    from providers import APIS

    profile = get_profile(key)
    endpoint = APIS[key].endpoints["release"]
    assert endpoint.method == "DELETE" or endpoint.path.endswith("/terminate")
    data_tier = profile.tier_of(profile.data_root)
    assert profile.loses(data_tier, "release"), f"{key}: release deletes the machine, {data_tier['name']} survives?"
    assert profile.data["teardown"]["release"]["irreversible"] is True


def test_paperspace_release_keeps_only_the_separate_storage_resource():
    profile = get_profile("paperspace")
    lost = {tier["name"] for tier in profile.tiers if profile.loses(tier, "release")}
    assert lost == {"block disk (Core)"}


# The facts of china.md. Checkpoints go to the persistent mount on every one of the four.
CHINA = {
    # key: (data root, tiers lost on stop, tiers lost on release, shutdown verb offered)
    "matpool": ("/mnt", [], ["system disk"], False),
    "gpushare": ("/hy-netdisk", ["system disk", "data disk"], ["system disk", "data disk"], True),
    "featurize": ("/home/featurize/work", ["system disk"], ["system disk"], False),
    "lanrui": ("/home/user/datadisk", ["system disk"], ["system disk", "data disk (数据盘)"], True),
}


@pytest.mark.parametrize("key", sorted(CHINA))
def test_china_rentals_checkpoint_to_the_persistent_mount(key):
    data_root, lost_on_stop, lost_on_release, shutdown = CHINA[key]
    profile = get_profile(key)
    assert profile.data_root == data_root
    assert profile.tier_of(data_root)["survives"]["stop"] is True
    assert [tier["name"] for tier in profile.tiers_lost_on("stop")] == lost_on_stop
    assert [tier["name"] for tier in profile.tiers if profile.loses(tier, "release")] == lost_on_release
    assert (profile.data["teardown"]["shutdown"]["via"] != "none") is shutdown


def test_matpools_meter_stops_only_at_stop_and_release():
    billing = get_profile("matpool").data["billing"]
    assert "停止并释放" in billing["meter_stop_verb"] and billing["irreversible"] is True


def test_missing_clocks_are_written_down():
    def clocks(key):
        return " ".join(clock["what"] + " " + clock["clock"] for clock in get_profile(key).danger_clocks)

    assert "~30 days after stop" in clocks("runpod")
    assert "lifetime expires" in clocks("vastai") and "balance reaches zero" in clocks("vastai")
    assert "6 hours" in clocks("paperspace") and "static IP" in clocks("paperspace")
    assert "15th day" in clocks("gpushare")
    assert all("GPU-idle" in clocks(key) for key in CHINA)


@pytest.mark.django_db
@pytest.mark.parametrize("key", [profile for profile in sorted(REQUIRED) if profile != "local"])
def test_every_tier_a_consequence_destroys_is_named_on_the_panel(key, alice, client):
    """The survival matrix, the adapter's verb and the panel say the same thing for every profile."""
    from delivery.levels import consequence_of
    from delivery.models import TeardownKind
    from fleet.provider_calls import execute

    project = factories.project(name=f"p-{key}", slug=f"p-{key}")
    join(project, alice)
    box = factories.box(name=f"p-{key}-box", project=project, profile_key=key, state="running")
    profile = get_profile(key)
    client.force_login(alice)
    page = html.unescape(client.get(f"/instances/{box.pk}/").content.decode())
    for kind, verb in ((TeardownKind.SHUTDOWN, "shutdown"), (TeardownKind.RELEASE, "release")):
        consequence = consequence_of(kind, box)
        if profile.data["teardown"][verb]["via"] == "none":
            assert consequence.not_offered and profile.data["billing"]["meter_stop_verb"] in consequence.not_offered
            assert consequence.not_offered in page and f'id="button-{kind}"' not in page
            with pytest.raises(Exception, match="has no"):
                execute(box, kind, "k")
            continue
        lost = [tier for tier in profile.tiers if profile.loses(tier, verb)]
        named = " ".join(consequence.data_lost)
        for tier in lost if verb == "release" or consequence.level == "L3" else profile.tiers_lost_on("stop"):
            assert f"{tier['name']} ({tier['path']})" in named, f"{key} {verb}: {tier['name']} not on the panel"
            assert f"{tier['name']} ({tier['path']})" in page
        if lost and verb == "release":
            assert consequence.level == "L3" and consequence.needs_second_person
