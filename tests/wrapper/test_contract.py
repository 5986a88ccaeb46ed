"""The typed contract of what a box is told (wrapper/contract.py): a spec written by the control side reads
back as the same spec; a key the wrapper does not know, or one it needs and lacks, is named, at the top
level and inside a part; and the shipped wrapper refuses such a spec before it runs anything (before, a
dict was read key by key, and a missing key surfaced as a KeyError deep in a subcommand)."""

import json
import subprocess
import sys

import pytest

from node.build import wrapper_file
from platforms.layout import NodeLayout
from tests.box_specs import spec_data
from wrapper.contract import BootRelaunch, CkptMirror, Distributed, Restore, Spec, SpecError, spec_of

LAYOUT = NodeLayout("/data", "vision", "vision-r1", "")


def test_a_spec_reads_back_as_itself_with_its_parts_typed():
    data = spec_data(
        LAYOUT,
        scheduler="slurm",
        distributed={"nodes": 2, "tasks_per_node": 4, "timeout": 600, "ifname": "eth0"},
        restore={"from": "/durable/ckpt", "files": [{"name": "latest.pth", "file": "latest.pth"}]},
        boot_relaunch={"max": 2},
    )
    spec = spec_of(data)
    assert isinstance(spec, Spec) and spec.run_id == "vision-r1" and spec.attempt == 1
    assert spec.distributed == Distributed(nodes=2, tasks_per_node=4, timeout=600, ifname="eth0")
    assert spec.restore == Restore(files=[{"name": "latest.pth", "file": "latest.pth"}], source="/durable/ckpt")
    assert spec.boot_relaunch == BootRelaunch(max=2) and isinstance(spec.ckpt_mirror, CkptMirror)
    assert spec_of(json.loads(spec.to_json())) == spec
    assert json.loads(spec.to_json())["restore"]["from"] == "/durable/ckpt"  # the JSON name, not Python's
    assert spec.but(attempt=2).attempt == 2 and spec.attempt == 1  # frozen: a changed copy, never an edit


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"resume_from": "/x"}, "spec: resume_from is not a key this wrapper reads"),
        (
            {"ckpt_mirror": {"root": None}},
            "spec.ckpt_mirror: target, keep, poll_seconds, hold_seconds, step_key missing",
        ),
        ({"distributed": {"nodes": 2, "tasks_per_node": 1, "timeout": 5, "rank": 1}}, "spec.distributed: rank is not"),
        ({"restore": ["latest.pth"]}, "spec.restore: an object, not list"),
    ],
)
def test_an_unknown_or_missing_key_is_named(change, said):
    with pytest.raises(SpecError, match=said.replace(".", r"\.")):
        spec_of(spec_data(LAYOUT, **change))
    data = spec_data(LAYOUT)
    del data["smoke_timeout"]
    with pytest.raises(SpecError, match="spec: smoke_timeout missing"):
        spec_of(data)


def test_the_shipped_wrapper_refuses_a_spec_it_cannot_read_before_it_runs_anything(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec_data(LAYOUT, argv=["touch", str(tmp_path / "ran")], resume_from="/x")))
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(wrapper_file()), "smoke", str(path)], capture_output=True, text=True
    )
    assert done.returncode != 0 and "resume_from is not a key this wrapper reads" in done.stdout + done.stderr
    assert not (tmp_path / "ran").exists()


def test_the_hardware_capsules_rules_are_the_same_on_the_box_and_at_readback():
    """Written on both sides on purpose (the box seals by wrapper/hardware.py, the readback checks again by
    custody/capsule.py, independently): the constants they judge a capsule by are the same."""
    from custody import capsule as readback
    from wrapper import hardware as box

    shared = ("SHA256", "WEIGHTS", "BINDINGS", "NO_GT", "WITH_GT", "NOT_APPLICABLE", "GT_ROLES", "COUNTS")
    differ = [name for name in shared if getattr(box, name) != getattr(readback, name)]
    assert differ == []
    assert readback.SHA256.pattern == box.SHA256.pattern and box.TOP == ("run.json", "test")
