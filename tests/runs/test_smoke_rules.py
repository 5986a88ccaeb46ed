"""The CPU smoke's rules for a script that ignores REMOTEGPU_SMOKE, on the wrapper itself with real
processes: past its bound (a setting, here 2 s) the whole process group is killed and the output says
why; a smoke that exits 0 after writing a whole export is told it trained for real, and the run page
gets that as an alert. A script that keeps the flag gets neither."""

import os
import sys
import time

import pytest

from runs.actions.lifecycle import do_finish_smoke
from runs.models import RunState
from tests import factories
from tests.runs.test_protocol_contract import answer_of, spec, spec_path, wrapper  # noqa: F401 (fixtures)
from tests.waiting import wait_until

WHOLE_EXPORT = (
    "import os\n"
    "out = os.environ['REMOTEGPU_OUTPUT_DIR']\n"
    "for name in ('run.json', 'config.yaml', 'train.csv', 'best.pth'):\n"
    "    open(os.path.join(out, name), 'w').write('x')\n"
)


def smoke(wrapper, spec, argv, bound=30) -> dict:  # noqa: F811
    answer_of("extract", wrapper.cmd_extract, spec)
    return answer_of("smoke", wrapper.cmd_smoke, spec.but(argv=argv, smoke_timeout=bound))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_smoke_past_its_bound_is_stopped_with_its_children_and_says_the_flag_was_ignored(
    wrapper,  # noqa: F811
    spec,  # noqa: F811
    tmp_path,
):
    marker = tmp_path / "worker.pid"
    script = (
        "import subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(marker)!r}, 'w').write(str(worker.pid))\n"
        "print('epoch 1/100', flush=True)\n"
        "time.sleep(300)\n"
    )
    started = time.monotonic()
    answer = smoke(wrapper, spec, [sys.executable, "-c", script], bound=2)
    assert time.monotonic() - started < 60
    assert answer["exit_code"] == 124
    assert "epoch 1/100" in answer["output"]
    assert "ran past its bound of 2 s" in answer["output"] and "ignore REMOTEGPU_SMOKE=1" in answer["output"]
    worker = int(marker.read_text())
    wait_until(lambda: not alive(worker), 10, 0.05, what=f"the smoke's data-loader-like child {worker} gone")


def test_a_smoke_that_writes_a_whole_export_is_told_it_trained_for_real(wrapper, spec):  # noqa: F811
    answer = smoke(wrapper, spec, [sys.executable, "-c", WHOLE_EXPORT])
    assert answer["exit_code"] == 0
    (warning,) = answer["warnings"]
    assert "wrote a whole export" in warning and "REMOTEGPU_SMOKE" in warning


def test_a_smoke_that_keeps_the_flag_gets_no_warning(wrapper, spec):  # noqa: F811
    answer = smoke(wrapper, spec, [sys.executable, "-c", "print('smoke ok')"])
    assert (answer["exit_code"], answer["warnings"]) == (0, [])


@pytest.mark.django_db
def test_the_smokes_warnings_reach_the_run_page_as_alerts(client, bob, box_row):
    run = factories.run(box_row, state=RunState.SMOKE)
    do_finish_smoke(run.pk, 3, "boom", ["the smoke wrote a whole export (run.json): REMOTEGPU_SMOKE"])
    run.refresh_from_db()
    assert run.state == RunState.FAILED_SMOKE
    alert = run.events.get(kind="alert")
    assert alert.message.startswith("Smoke: the smoke wrote a whole export")
    client.force_login(bob)
    assert "Smoke: the smoke wrote a whole export" in client.get(run.get_absolute_url()).content.decode()
