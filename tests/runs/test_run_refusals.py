"""Preflight and smoke refuse before paid compute, with the exact reason; quoting holds end to end."""

import json
import sys
import uuid
from pathlib import Path

import pytest

from runs.actions.lifecycle import do_start_preflight
from runs.models import GpuLock, RunState
from tests.runs.conftest import SETTLED, edit_train, wait_state

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_preflight_names_every_missing_input_and_every_shortfall_with_its_exact_words(
    bob, make_run, celery_worker_process
):
    """The box measures inputs, space and inodes in one preflight, and the verdict names every problem
    it found, not the first: missing data and manifest, a storage budget that does not fit (with its
    exact shortfall), too few inodes. Nothing ran and a refused run holds no GPU."""
    missing = f"/tmp/remotegpu-no-such-data-{uuid.uuid4().hex}"
    run = make_run(
        data_paths=[missing, "/tmp"],
        manifest_path="$HOME/no-such-manifest.json",
        checkpoint_bytes=50 * 1024**4,
        checkpoints_retained=3,
        expected_files=4_000_000_000,
        gpus=[0],
    )
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_PREFLIGHT
    problems, budget = run.preflight_report["problems"], run.preflight_report["budget"]
    assert problems[0] == f"Missing data on the node: {missing}"  # /tmp exists: not named
    assert problems[1] == f"Missing manifest on the node: {Path.home() / 'no-such-manifest.json'}"  # $HOME expanded
    assert budget["required_bytes"] == (150 + 100) * 1024**4  # three retained, and the staged best + last
    assert budget["short_bytes"] == budget["needed_bytes"] - budget["free_bytes"] > 0
    assert problems[2].startswith("Not enough space") and f"short by {budget['short_bytes']:,} bytes" in problems[2]
    assert problems[3].startswith("Not enough inodes")
    assert f"short by {budget['short_inodes']:,} inodes" in problems[3]
    assert all("GPU" in problem for problem in problems[4:]), problems  # this box has none to give
    assert run.smoke_exit_code is None  # nothing ran
    assert not GpuLock.objects.exists()  # a refused run holds no GPU


def test_smoke_that_raises_stops_at_failed_smoke_with_the_traceback(bob, make_run, source, celery_worker_process):
    edit_train(
        source,
        "    if smoke:\n        config = dict(",
        "    if smoke:\n        raise RuntimeError('shape mismatch in smoke')\n        config = dict(",
    )
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_SMOKE
    assert run.smoke_exit_code == 1
    assert "Traceback" in run.smoke_output and "shape mismatch in smoke" in run.smoke_output
    assert not GpuLock.objects.exists()
    assert run.launched_command == ""


def test_smoke_with_a_traceback_but_exit_0_fails(bob, make_run, source, celery_worker_process):
    script = "import traceback\ntry:\n    1/0\nexcept Exception:\n    traceback.print_exc()\n"
    (source / "swallow.py").write_text(script)
    run = make_run(command=[sys.executable, "swallow.py"])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.FAILED_SMOKE and run.smoke_exit_code == 0


def test_shell_metacharacters_reach_the_program_verbatim_and_closeout_quarantines(
    bob, make_run, node, source, celery_worker_process
):
    canary = Path(f"/tmp/remotegpu-canary-{uuid.uuid4().hex}")
    (source / "echo_args.py").write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    nasty = [
        f"$(touch {canary})",
        f"a; touch {canary}",
        'it\'s "quoted"',
        "two words",
        "../../escape",
        f"`touch {canary}`",
    ]
    run = make_run(command=[sys.executable, "echo_args.py", *nasty])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED)
    assert run.state == RunState.RUNNING, run.preflight_report
    assert json.loads(run.smoke_output.strip().splitlines()[-1]) == nasty
    run = wait_state(run, {RunState.QUARANTINED}, refresh=True)
    # The command wrote no export: closeout fails, the attempt is quarantined with its reason.
    reason = (node.quarantine(run, 1) / "reason.txt").read_text()
    assert "required file run.json is missing" in reason
    assert run.close_reason == reason.strip()
    assert not node.export(run).exists()
    assert json.loads((node.quarantine(run, 1) / "log.txt").read_text().strip()) == nasty
    assert not canary.exists()
    # Nothing was written outside the project's run root.
    assert not (node.root.parent / "escape").exists() and not (node.root.parent.parent / "escape").exists()


def test_closeout_refuses_a_forbidden_latest_pth(bob, make_run, node, source, celery_worker_process):
    edit_train(
        source,
        '    print(f"done: best epoch',
        '    shutil.copyfile(os.path.join(ckpt_dir, "latest.pth"), os.path.join(out_dir, "latest.pth"))\n'
        '    print(f"done: best epoch',
    )
    run = make_run()
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, {RunState.QUARANTINED, RunState.EXPORTED, RunState.FAILED_SMOKE}, refresh=True)
    assert run.state == RunState.QUARANTINED
    assert "latest.pth is forbidden inside an export" in run.close_reason
    assert not node.export(run).exists()
    assert (node.quarantine(run, 1) / "export-partial" / "best.pth").exists()


def test_the_closeouts_staging_copy_is_in_the_budget():
    """The closeout copies output/ (best.pth, last.pth) into export/.partial before the rename;
    a run whose checkpoints fit the disk without that copy filled it at its last step."""
    from runs.budget import storage_budget
    from runs.models import Run

    run = Run(checkpoint_bytes=1024**3, checkpoints_retained=2, scratch_bytes=0, expected_files=10)
    space = {"free_bytes": int(3.5 * 1024**3), "free_inodes": 10**6, "measured_at": "/workspace"}
    budget = storage_budget(run, space, margin_fraction=0.0, margin_min_bytes=0)
    assert budget.required_bytes == 4 * 1024**3  # two retained + the staged best and last
    assert budget.short_bytes == int(0.5 * 1024**3) and "short by" in budget.problems()[0]


def test_the_checkpoint_mirror_is_in_the_budget_where_it_shares_the_disk():
    """The mirror copies the retained checkpoints and a best to the durable root: on the data root's own
    disk (a box whose durable root is a directory of it) they are bytes of the same budget; on a disk
    of their own, that disk must hold them."""
    from runs.budget import storage_budget
    from runs.models import Run

    gib = 1024**3
    run = Run(checkpoint_bytes=gib, checkpoints_retained=2, scratch_bytes=0, expected_files=10)
    space = {"free_bytes": 8 * gib, "free_inodes": 10**6, "measured_at": "/root", "device_id": 7}
    shared = storage_budget(run, {**space, "mirror": {"free_bytes": 8 * gib, "device_id": 7}}, 0.0, 0)
    assert shared.mirror_bytes == 3 * gib and shared.required_bytes == 7 * gib and not shared.problems()
    short = {"free_bytes": 2 * gib, "device_id": 9, "measured_at": "/lambda/nfs"}
    apart = storage_budget(run, {**space, "mirror": short}, 0.0, 0)
    assert apart.mirror_bytes == 0 and apart.required_bytes == 4 * gib
    assert apart.problems() == [
        "Not enough space for the checkpoint mirror on /lambda/nfs: needs 3.00 GiB, free 2.00 GiB. "
        "Free space on the durable tier, or keep fewer checkpoints."
    ]
    assert storage_budget(run, space, 0.0, 0).mirror_bytes == 0  # no mirror measured: none on the box


def test_hot_data_goes_to_the_fast_local_disk_where_the_profile_has_one():
    """On Gpushare the data root is the per-GB netdisk: the cache and staged datasets go to /hy-tmp."""
    from fleet.models import Instance
    from platforms.layout import NodeLayout

    assert Instance(profile_key="gpushare").hot_root == "/hy-tmp"
    assert Instance(profile_key="runpod").hot_root == ""
    layout = NodeLayout("/hy-netdisk", "vision", "r1", hot_root="/hy-tmp")
    assert layout.cache == "/hy-tmp/remotegpu-cache/vision" and layout.run_root == "/hy-netdisk/vision"
    assert NodeLayout("/workspace", "vision", "r1").cache == "/workspace/vision/cache"
