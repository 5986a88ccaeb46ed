"""Custody tests run against the same real node fixtures as the runs tests."""

from tests.runs.conftest import instance, make_run, node, project, source  # noqa: F401
