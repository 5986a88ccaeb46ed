"""Example variants that each break one rule of the export contract, run for real on the loopback box:
each is quarantined with the rule named (its staged export kept under quarantine/, nothing sealed)."""

import pytest

from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.runs.conftest import edit_train, set_config, wait_state

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(standin_source):
    """The rules are about the export, not the training: the stand-in trainer (tinyfit's contract, no torch)."""
    return standin_source


DONE = '    print(f"done: best epoch'

VARIANTS = {
    # A status sentinel beside run.json: the atomic rename is the only completion signal.
    "sentinel": (
        DONE,
        '    open(os.path.join(out_dir, "COMPLETE.json"), "w").write("{}")\n' + DONE,
        "COMPLETE.json is not allowed at the top of an export",
    ),
    # last.pth linked to the rolling checkpoint instead of a frozen copy.
    "linked-last": (
        '    shutil.copyfile(os.path.join(prebuilt, f"last-{epochs}.pth"), os.path.join(out_dir, "last.pth"))',
        '    os.link(os.path.join(ckpt_dir, "latest.pth"), os.path.join(out_dir, "last.pth"))',
        "last.pth is a hard link to a file that may still change",
    ),
    # Results at the top instead of under test/<id>/.
    "top-results": (
        DONE,
        '    os.makedirs(os.path.join(out_dir, "results"), exist_ok=True)\n' + DONE,
        "results is not allowed at the top of an export",
    ),
}


def test_each_broken_export_rule_quarantines_the_run_with_the_rule_named(
    bob, make_run, source, node, celery_worker_process
):
    set_config(source, epochs=2)
    original = (source / "train.py").read_text()
    for name, (old, new, rule) in VARIANTS.items():
        (source / "train.py").write_text(original)
        edit_train(source, old, new)
        run = make_run()
        do_start_preflight(run.pk, actor=bob)
        run = wait_state(run, {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE}, timeout=180)
        assert run.state == RunState.QUARANTINED and rule in run.close_reason, (name, run.close_reason)
        assert run.failure_class == "contract", (name, run.failure_class)  # never "retry: it resumes"
        assert not node.export(run).exists(), name
        assert rule in (node.quarantine(run, run.attempt) / "reason.txt").read_text(), name
