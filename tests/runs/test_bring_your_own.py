"""A team's own training script on the loopback box: `examples/lightfit/train_plain.py` is written the way
a Lightning user writes a loop (its own checkpoint folder and CSV logger), with no RemoteGPU in mind.
Unchanged, it trains and is refused at the seal as a contract failure naming every missing item, never
retried on its own; with the run helper's lines (train.py, at most ten changed lines) it reaches a
verified export whose metric is recomputed from its predictions."""

import difflib
import shutil
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from custody.actions import do_start_verification
from custody.models import CustodyStatus
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState
from tests.conftest import REPO
from tests.custody.test_custody_e2e import wait_record
from tests.runs.conftest import wait_state

pytestmark = pytest.mark.django_db(transaction=True)

LIGHTFIT = REPO / "examples" / "lightfit"
SETTLED = {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE, RunState.FAILED_PREFLIGHT}


@pytest.fixture
def source():
    target = Path(settings.VAR_DIR) / "sources" / uuid.uuid4().hex
    shutil.copytree(LIGHTFIT, target, ignore=shutil.ignore_patterns("__pycache__", "lightning_logs"))
    yield target
    shutil.rmtree(target, ignore_errors=True)


def code_lines(path: Path) -> list[str]:
    """The file's lines after its module docstring."""
    text = path.read_text()
    opening = text.index('"""')
    return text[text.index('"""', opening + 3) + 3 :].splitlines()


def test_the_helper_path_changes_at_most_ten_lines_of_the_trainer():
    diff = difflib.unified_diff(code_lines(LIGHTFIT / "train_plain.py"), code_lines(LIGHTFIT / "train.py"), n=0)
    changed = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert 0 < len(changed) <= 10, changed


def test_the_unchanged_trainer_gets_the_contract_failure_with_every_missing_item(
    bob, make_run, source, celery_worker_process
):
    run = make_run(command=[sys.executable, "train_plain.py"])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=180, refresh=True)
    assert run.state == RunState.QUARANTINED, (run.state, run.smoke_output[-500:])
    assert run.exit_code == 0 and run.failure_class == "contract"
    assert run.close_reason.startswith("export contract not met (3 problems): ")
    for name in ("run.json", "config.yaml", "best.pth"):
        assert f"required file {name} is missing" in run.close_reason
    assert "train.csv" not in run.close_reason  # paperwork: it warns at sealing, never fails it
    failure = run.events.get(kind="failure")
    assert "Export contract not met" in failure.message and "docs/contract.md" in failure.message
    assert "resumes from the latest checkpoint" not in failure.message
    assert run.attempt == 1 and not run.events.filter(message__icontains="relaunch").exists()


def test_the_trainer_with_the_helpers_lines_reaches_a_verified_export(bob, make_run, source, celery_worker_process):
    run = make_run(command=[sys.executable, "train.py"])
    do_start_preflight(run.pk, actor=bob)
    run = wait_state(run, SETTLED, timeout=180, refresh=True)
    assert run.state == RunState.EXPORTED, (run.state, run.close_reason, run.smoke_output[-500:])
    assert [row["step"] for row in run.curve][-1] == 78  # train.csv through rg.log
    assert (run.ckpt_mirror or {}).get("local", {}).get("name", "").startswith("epoch=5-step=78")
    record = wait_record(do_start_verification(run.pk, actor=bob))
    assert record.status == CustodyStatus.VERIFIED, record.failure
    (loss,) = [m for m in record.evidence["metrics"] if m["name"] == "loss"]
    assert loss["test"] == "val" and loss["within_tolerance"]
