"""Custody tests run against the same real node fixtures as the runs tests."""

import pytest

from tests.runs.conftest import instance, make_run, node, project, source  # noqa: F401


@pytest.fixture
def no_worker(_worker):
    """Consequences executed in this process only: the session's worker (if running) is stopped and the
    queue emptied, so an approval's own enqueued execution never runs beside the test's (or after it)."""
    from remotegpu_site.celery import app

    _worker.stop()
    app.control.purge()
    yield
    app.control.purge()
