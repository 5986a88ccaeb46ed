"""The suite's own test order (tests/scheduling.py): a shuffled module keeps Django's order of kinds.

A module-scoped Playwright browser keeps an event loop marked running in the test process's thread
while it is open, and Django refuses every database call from such a thread. In
tests/browser/test_load.py the PostgreSQL test (database) ran after the page test (browser) under
`--shuffle=2938` and failed at setup with SynchronousOnlyOperation (stress pass 3). pytest-django
orders database tests before tests without one, as Django's runner does; the shuffle kept that order
only across modules, not inside one.
"""

import subprocess
import sys
from itertools import groupby

from tests.conftest import REPO, subprocess_env
from tests.scheduling import SHARED_UNITS, UnitScheduling, module_of, unit_of

SHARED_STACK = SHARED_UNITS[0]

MODULE = "tests/browser/test_load.py"
DATABASE_TEST = f"{MODULE}::test_fifty_concurrent_home_pages_on_postgresql"
BROWSER_TEST = f"{MODULE}::test_fifty_concurrent_home_pages_all_answer_and_the_next_one_too"


def collected(*options: str, paths: tuple[str, ...] = (MODULE,)) -> list[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options, *paths]
    done = subprocess.run(command, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith(paths) and "::" in line]


def test_a_shuffled_module_runs_its_database_test_before_its_browser_test():
    # Seeds 1, 2 and 2938 each put the browser test first before the fix; one subprocess is enough.
    assert collected("--shuffle=2938") == [DATABASE_TEST, BROWSER_TEST]


def test_the_browser_modules_run_together_on_one_worker_in_either_order():
    """They share the session's stack (tests/browser/conftest.py): one worker starts it once, so xdist must
    hand them out as one unit and the collection must keep them together (measured or shuffled order)."""
    for options in ((), ("--shuffle=7",)):
        nodeids = collected(*options, paths=("tests/browser", "tests/site/test_test_order.py"))
        modules = {module_of(nodeid) for nodeid in nodeids}
        assert len([module for module in modules if module.startswith(SHARED_STACK)]) >= 5
        runs = [unit for unit, _ in groupby(unit_of(nodeid) for nodeid in nodeids)]
        assert runs.count(SHARED_STACK) == 1, runs
        assert "tests/site/test_test_order.py" in runs
    # xdist's scope for a node id is the unit: every browser test lands in one scope, other modules in their own.
    scope = UnitScheduling._split_scope
    assert scope(None, "tests/browser/test_runs.py::test_a") == scope(None, "tests/browser/test_stop.py::test_b")
    assert scope(None, "tests/runs/test_push.py::test_c") == "tests/runs/test_push.py"
    # The Slurm modules each start their own cluster: they spread over the workers.
    assert scope(None, "tests/slurm/test_jobs.py::test_a") != scope(None, "tests/slurm/test_requeue.py::test_b")
