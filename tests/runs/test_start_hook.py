"""Recovery on the box without us: an opted-in run's launch installs a start hook; with every worker
stopped (no beat runs in tests), the box "restarts" (the attempt's processes killed, its boot marker
changed) and the hook runs as the platform would at boot: the run resumes and seals with no control
plane. Started again, the workers find it exported, the interruption counted once."""

import csv
import subprocess

import pytest

from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.runs.conftest import SETTLED, set_config, wait_file, wait_state
from tests.runs.test_interruptions import boot_marker, interrupt  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """What this module tests happens around a training, not in it: tinyfit's contract without torch."""
    return standin_source


def test_the_start_hook_relaunches_a_cut_off_run_that_seals_with_no_control_plane(
    bob,
    make_run,
    node,
    source,
    boot_marker,  # noqa: F811
    gate,
    celery_worker_process,
):
    set_config(source, epochs=12, hold_file=gate.hold(at=2).path)  # held at epoch 2 until interrupted
    run = make_run(auto_relaunch=True, max_relaunches=2)
    do_start_preflight(run.pk, actor=bob)
    assert wait_state(run, SETTLED).state == RunState.RUNNING
    hook = node.root / ".remotegpu" / "start-hook.sh"
    assert hook.exists()
    assert any("Start hook on the box" in m for m in run.events.values_list("message", flat=True))

    celery_worker_process.stop()
    try:
        interrupt(node, run)
        gate.release()
        subprocess.run(["sh", str(hook)], check=True, timeout=30)  # the platform, at boot
        try:
            wait_file(node.export(run), timeout=120)  # sealed on the box, nobody watching
        except AssertionError:
            tools, active = node.root / ".remotegpu", node.active(run)
            seen = [(tools / "boot-resume.log").read_text(), hook.read_text(), sorted(p.name for p in active.iterdir())]
            seen += [(path).read_text()[-2000:] for path in active.glob("**/log.txt")]
            seen += [(path).read_text()[-2000:] for path in active.glob("*.log")]
            raise AssertionError(f"not sealed: {seen}") from None
    finally:
        celery_worker_process.start()

    run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED}, timeout=120, refresh=True)
    assert run.state == RunState.EXPORTED and run.attempt == 1
    assert run.boot_relaunches == 1 and run.relaunches == 1  # the interruption, counted once
    log = (node.active(run) / "attempt-1" / "log.txt").read_text()
    assert "relaunched on the box by its start hook after a restart (1 of 2)" in log
    assert int(log.split("resumed from epoch ")[1].split()[0]) >= 2
    with open(node.export(run) / "train.csv") as handle:
        assert [int(row["epoch"]) for row in csv.DictReader(handle)] == list(range(1, 13))
    messages = list(run.events.values_list("message", flat=True))
    assert sum("relaunched on the box by its start hook" in m for m in messages) == 1

    # A second "boot" finds nothing cut off: the sealed run is left alone.
    answer = subprocess.run(["sh", str(hook)], check=True, timeout=30)
    assert answer.returncode == 0
    last = (node.root / ".remotegpu" / "boot-resume.log").read_text().splitlines()[-1]
    assert '"relaunched": []' in last and '"why": "closed"' in last
