"""Custody tests run against the same real node fixtures as the runs tests."""

import pytest

from tests.custody import sealed
from tests.runs.conftest import *  # noqa: F403 (the loopback box, runs and their sources: its __all__)


@pytest.fixture(scope="session", autouse=True)
def durable_mount():
    """The loopback box's durable root is a disk of its own (a tmpfs), measured as such by the mirror."""
    mounted = sealed.mount_durable_root()
    yield mounted
    sealed.unmount_durable_root()


@pytest.fixture
def exported(make_run):  # noqa: F811 (make_run is the runs fixture imported above)
    """make(**fields): a run whose export is sealed on the loopback box; its files removed after."""
    runs = []

    def make(**fields):
        run = make_run(**fields)
        sealed.seal(run)
        runs.append(run)
        return run

    yield make
    for run in runs:
        sealed.cleanup(run)
