"""Every CSV the product exports opens in a spreadsheet as text: a cell that starts like a formula
(`=`, `+`, `-`, `@`, tab, carriage return; OWASP's CSV injection rule) gets a leading `'`. The Team page
accepts a username such as `=HYPERLINK(…)` and the project form a slug such as `-1-1`, and both reach the
audit export."""

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from core.audit import record
from core.csvsafe import FORMULA_STARTS, neutral
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_a_cell_that_starts_like_a_formula_is_kept_as_text(start):
    assert neutral(f"{start}1+cmd|' /C calc'!A0") == f"'{start}1+cmd|' /C calc'!A0"


@pytest.mark.parametrize("plain", ["alice", "run-1", "1-1", "", "a=b", " =x", 3])
def test_a_plain_cell_is_kept_as_it_is(plain):
    assert neutral(plain) == str(plain)


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_the_audit_export_writes_no_formula_from_a_username_or_a_message(client, alice, admin_user, start):
    project = factories.project(alice, slug=factories.unique("-1-1"))
    evil = get_user_model().objects.create_user(f"{start}HYPERLINK(x)"[:150])
    record("member.added", f"{start}SUM(A1:A9)", actor=evil, project=project, subject=evil)
    client.force_login(admin_user)
    text = client.get("/audit/", {"format": "csv"}).content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1
    assert rows[0]["actor"] == rows[0]["subject"] == f"'{start}HYPERLINK(x)"
    assert rows[0]["message"] == f"'{start}SUM(A1:A9)"
    assert rows[0]["project"] == f"'{project.slug}"
    for row in rows:
        assert not any(cell.startswith(FORMULA_STARTS) for cell in row.values())
