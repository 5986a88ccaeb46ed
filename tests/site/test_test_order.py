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

from tests.conftest import REPO, subprocess_env

MODULE = "tests/browser/test_load.py"
DATABASE_TEST = f"{MODULE}::test_fifty_concurrent_home_pages_on_postgresql"
BROWSER_TEST = f"{MODULE}::test_fifty_concurrent_home_pages_all_answer_and_the_next_one_too"


def collected(*options: str) -> list[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options, MODULE]
    done = subprocess.run(command, cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith(MODULE + "::")]


def test_a_shuffled_module_runs_its_database_test_before_its_browser_test():
    # Seeds 1, 2 and 2938 each put the browser test first before the fix; one subprocess is enough.
    assert collected("--shuffle=2938") == [DATABASE_TEST, BROWSER_TEST]
