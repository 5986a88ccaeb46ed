"""Which module runs first, and how long each took (`-p tests.scheduling` in pytest's addopts).

xdist's loadfile keeps a module on one worker and hands modules out in collection order (with
--no-loadscope-reorder, as bin/test runs it). Ordering modules by their measured duration, longest
first, keeps a long module from starting last and running alone at the end (the longest-first rule
of list scheduling). The durations come from tests/module_durations.json, written from a full run's
own table: every run prints its table sorted by time and saves it in test-artifacts/.

--shuffle=SEED puts the modules, and the tests inside each module, in a random order the seed fixes
(every xdist worker collects the same order): `make test-stress` runs that way, so a test that needs
an earlier test's leftovers, or a later one's absence, fails. Inside a module the shuffle keeps
Django's order of kinds (pytest-django's, as Django's runner: database tests first, tests without a
database last), which the suite relies on: a module-scoped Playwright browser keeps an event loop
marked running in its thread, and a database test after it in the same module is refused
(SynchronousOnlyOperation: stress pass 3, seed 2938, tests/browser/test_load.py).

The unit xdist hands a worker is a module, except tests/browser/: its modules share the session's one
stack (`manage.py runstack`, tests/browser/conftest.py), which took ~40 s of a loaded machine to start in
each worker that ran one of them; they go to one worker together (UnitScheduling), which starts it once.
tests/slurm/'s modules are units of their own: each worker that runs one starts its own cluster (ports of its
own, munge on a socket of its own, in about 1.2 s), so the longest folder no longer sets the suite's length.
"""

import json
import random
from collections import defaultdict
from pathlib import Path

import pytest
from pytest_django.plugin import validate_django_db
from xdist.scheduler import LoadFileScheduling

REPO = Path(__file__).resolve().parent.parent
MEASURED = Path(__file__).with_name("module_durations.json")
TABLE = REPO / "test-artifacts" / "module-durations.json"
UNMEASURED_SECONDS = 30.0  # a module new since the last table: assume a middling e2e module
# Folders whose modules share a session resource: one worker runs them together and starts it once.
SHARED_UNITS = ("tests/browser/",)


def pytest_addoption(parser):
    parser.addoption("--shuffle", type=int, default=None, metavar="SEED", help="random module and test order")


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """What runs on one worker: the module, or all of a shared folder (tests/browser/: the one stack they
    share)."""
    module = module_of(nodeid)
    return next((folder for folder in SHARED_UNITS if module.startswith(folder)), module)


def measured() -> dict[str, float]:
    try:
        return {str(key): float(value) for key, value in json.loads(MEASURED.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def database_kind(item) -> int:
    """pytest-django's order key: 0 a database test, 1 a transactional one, 2 no database."""
    fixtures = getattr(item, "fixturenames", [])
    marker = item.get_closest_marker("django_db")
    transactional = "transactional_db" in fixtures or "live_server" in fixtures
    if marker:
        transaction, reset_sequences, *_ = validate_django_db(marker)
        transactional = transactional or transaction or reset_sequences
    if transactional:
        return 1
    return 0 if marker or "db" in fixtures else 2


def pytest_collection_modifyitems(config, items):
    by_module: dict[str, list] = defaultdict(list)
    for item in items:
        by_module[module_of(item.nodeid)].append(item)
    by_unit: dict[str, list[str]] = defaultdict(list)
    for module in by_module:
        by_unit[unit_of(module)].append(module)
    seed = config.getoption("shuffle")
    if seed is not None:
        chance = random.Random(seed)
        units = sorted(by_unit)
        chance.shuffle(units)
        for unit in units:
            by_unit[unit].sort()
            chance.shuffle(by_unit[unit])
        for module in sorted(by_module):
            chance.shuffle(by_module[module])
            by_module[module].sort(key=database_kind)
    else:
        seconds = measured()

        def took(module: str) -> float:
            return seconds.get(module, UNMEASURED_SECONDS)

        units = sorted(by_unit, key=lambda unit: -sum(map(took, by_unit[unit])))
        for unit in units:
            by_unit[unit].sort(key=lambda module: -took(module))
    items[:] = [item for unit in units for module in by_unit[unit] for item in by_module[module]]


class UnitScheduling(LoadFileScheduling):
    """xdist's loadfile with unit_of as its scope: a unit's tests run on one worker, in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        return UnitScheduling(config, log)
    return None


class Durations:
    """Seconds per module, summed from every phase of every test's report (the controller's view)."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)

    def pytest_runtest_logreport(self, report):
        module = module_of(report.nodeid)
        self.seconds[module] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests[module] += 1

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        ranked = sorted(self.seconds.items(), key=lambda pair: -pair[1])
        total = sum(self.seconds.values())
        write = terminalreporter.write_line
        terminalreporter.section("seconds per module, slowest first")
        for module, seconds in ranked:
            write(f"{seconds:8.1f} s {100 * seconds / total:5.1f} % {self.tests[module]:4d} tests  {module}")
        write(f"{total:8.1f} s in all, over {len(ranked)} modules (worker seconds, not wall clock)")
        TABLE.parent.mkdir(exist_ok=True)
        TABLE.write_text(json.dumps({module: round(seconds, 1) for module, seconds in ranked}, indent=1) + "\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) sees every report
        config.pluginmanager.register(Durations(), "module-durations")
