"""History's search answers from an index on both databases and finds exactly what a plain
substring / prefix match finds — including after runs are renamed and deleted, and (SQLite) after a
migration rebuilt the table and dropped its triggers."""

import shutil
import subprocess
import sys
import uuid

import pytest

from tests import factories
from tests.built_once import migrated_sqlite
from tests.conftest import REPO, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

QUERIES = ["abc", "ABC", "lr 3", "train.py", "--seed", "x", "ab", "deadbe", "DEADBE", '"quoted', "zzzzzz", "%", "_"]


def expected(rows: list[dict], query: str) -> set[str]:
    low = query.lower()
    hits = set()
    for row in rows:
        text = [row["run_id"], row["title"], " ".join(row["command"])]
        hexes = [row["resolved_commit"], row["config_sha256"]]
        # The command is matched as stored (JSON text): a query spanning two arguments is not promised.
        if any(low in value.lower() for value in text) or any(value.startswith(low) for value in hexes if value):
            hits.add(row["run_id"])
    return hits


def check() -> None:
    """Seed runs, search, compare with `expected`; rename, delete, drop the triggers; compare again."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from console import history
    from runs import search
    from runs.models import Run

    admin = get_user_model().objects.create_superuser(f"s{uuid.uuid4().hex[:6]}")
    project = factories.project(name="Search", slug=f"search{uuid.uuid4().hex[:6]}")
    box = factories.box(name=f"{project.slug}-box-20261130", project=project, profile_key="local")
    titles = ["lr 3e-4 abc", "ABCdef", "baseline", 'quoted "name', "naïve ünïcode", ""]
    for n, title in enumerate(titles * 3):
        factories.run(
            run_id=f"{project.slug}-{n:03d}{'abc' if n % 5 == 0 else ''}",
            title=title,
            project=project,
            instance=box,
            source_kind="node_path",
            source_path="/srv/x",
            command=["python3", "train.py", "--seed", str(n)],
            config_path="c.yaml",
            resolved_commit=("deadbeef" if n % 4 == 0 else "0123abcd") + "0" * 32,
            config_sha256=uuid.uuid4().hex * 2,
        )

    def compare(label):
        rows = list(
            Run.objects.filter(project=project).values("run_id", "title", "command", "resolved_commit", "config_sha256")
        )
        for query in QUERIES:
            got = set(
                history.filtered(admin, {"q": query, "project": project.slug})[0].values_list("run_id", flat=True)
            )
            assert got == expected(rows, query), (connection.vendor, label, query, got ^ expected(rows, query))

    compare("seeded")
    first = Run.objects.filter(project=project).order_by("pk").first()
    Run.objects.filter(pk=first.pk).update(title="renamed zzzzzz")
    Run.objects.filter(project=project, title="baseline").first().delete()
    compare("renamed and deleted")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            for name in search.TRIGGERS:
                cursor.execute("DROP TRIGGER " + name)  # as a table rebuild by a migration does
        search.ensure_sqlite_index()
        Run.objects.filter(pk=first.pk).update(title="again abc")
        compare("after the triggers were recreated")
    print("SEARCH OK", connection.vendor)


def test_search_matches_a_plain_scan_on_this_database():
    check()


def test_search_matches_a_plain_scan_on_sqlite(tmp_path, tmp_path_factory):
    """CI's database is PostgreSQL: SQLite's FTS5 path is checked in a process of its own, on a copy of the
    session's migrated SQLite database (the migrations made its search index and triggers)."""
    shutil.copyfile(migrated_sqlite(tmp_path_factory), tmp_path / "search.sqlite3")
    env = subprocess_env(DATABASE_URL=f"sqlite:///{tmp_path}/search.sqlite3", REMOTEGPU_VAR_DIR=str(tmp_path))
    code = "import django; django.setup(); from tests.runs.test_search import check; check()"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "SEARCH OK sqlite" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
