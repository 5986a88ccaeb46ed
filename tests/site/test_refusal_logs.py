"""Every expected 403 wrote a full traceback to the log (Django logs the PermissionDenied with its
stack): the line stays, the traceback goes. A real failure (a 500) keeps its traceback."""

import logging

import pytest
from django.test import Client

from tests import factories

pytestmark = pytest.mark.django_db


def refused_records(caplog):
    return [record for record in caplog.records if record.name == "django.request"]


def test_a_refused_page_is_one_line_without_a_traceback(caplog, alice, carol):
    box = factories.box(factories.project(alice, carol))
    client = Client()
    client.force_login(carol)  # a viewer: may look, never operate
    with caplog.at_level(logging.WARNING, logger="django.request"):
        answer = client.post(f"/instances/{box.pk}/teardown/", {"kind": "release", "reason": "x"})
    assert answer.status_code == 403
    records = refused_records(caplog)
    assert records and all(record.exc_info is None for record in records)
    assert "Traceback" not in caplog.text and "Forbidden" in caplog.text


def test_a_server_error_keeps_its_traceback():
    from core.logs import RefusalsWithoutTraceback

    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "Internal Server Error", (), None)
        record.exc_info, record.status_code = sys.exc_info(), 500
    assert RefusalsWithoutTraceback().filter(record) and record.exc_info is not None
