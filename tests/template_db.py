"""Each xdist worker's PostgreSQL test database, cloned from one migrated template.

Migrating costs ~13 s of CPU per database; three workers migrating at once on two cores cost the
suite ~20 s of wall clock before the first test. The first worker to get here builds the template
(under an advisory lock, so the others wait for it instead of building their own) and every worker
clones it with CREATE DATABASE … TEMPLATE, which copies files (~0.1 s). The template is named by a
fingerprint of what builds it (the migrations, or the models under --nomigrations): a changed
migration gets a new template, an unchanged one is reused by the next run, and a template whose
build was interrupted is never used (it is built under another name and renamed when complete).
"""

import contextlib
import hashlib
import re
from pathlib import Path

from django.db import DatabaseError, connection

REPO = Path(__file__).resolve().parent.parent
LOCK_KEY = 0x52475055  # "RGPU": the advisory lock every suite on this server takes to build a template


def fingerprint(migrate: bool) -> str:
    """What the template's tables are made from: every migration, or every model module."""
    patterns = ("*/migrations/*.py",) if migrate else ("*/models.py", "*/models/*.py")
    digest = hashlib.sha256(b"migrate" if migrate else b"syncdb")
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            if ".venv" not in path.parts:
                digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _exists(cursor, name: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
    return cursor.fetchone() is not None


def _quoted(name: str) -> str:
    return connection.ops.quote_name(name)


def _build(template: str, cursor) -> None:
    """Migrate a database under a temporary name, then give it the template's name."""
    building = f"{template}_building"
    from django.conf import settings

    settings_dict, configured = connection.settings_dict, settings.DATABASES[connection.alias]
    wanted, original = settings_dict["TEST"].get("NAME"), (settings_dict["NAME"], configured["NAME"])
    settings_dict["TEST"]["NAME"] = building
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    finally:
        connection.close()
        settings_dict["TEST"]["NAME"] = wanted
        settings_dict["NAME"], configured["NAME"] = original
    cursor.execute(f"ALTER DATABASE {_quoted(building)} RENAME TO {_quoted(template)}")


def _drop_stale(cursor, base: str, template: str) -> None:
    """Templates of earlier migrations: dropped when nobody uses them (another suite may)."""
    cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{base}\\_tpl\\_%"])
    for (name,) in cursor.fetchall():
        if name != template:
            # In use by a suite still running: it stays until a later run drops it.
            with contextlib.suppress(DatabaseError):
                cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(name)}")


def _fresh_copy(cursor, name: str, template: str) -> None:
    """name, whatever was there before (FORCE ends its sessions), a file copy of the template."""
    cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
    cursor.execute(f"CREATE DATABASE {_quoted(name)} TEMPLATE {_quoted(template)}")


def clone_from_template(migrate: bool) -> str:
    """Make this worker's test database a copy of the template; its name (settings now point at it)."""
    from django.conf import settings

    target = connection.creation._get_test_db_name()
    base = re.sub(r"_gw\d+$", "", target)
    template = f"{base}_tpl_{fingerprint(migrate)}"
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        try:
            if not _exists(cursor, template):
                _build(template, cursor)
                _drop_stale(cursor, base, template)
            _fresh_copy(cursor, target, template)  # over an aborted run's
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])
    connection.close()
    settings.DATABASES[connection.alias]["NAME"] = target
    connection.settings_dict["NAME"] = target
    CLONED[target] = template
    return target


CLONED: dict[str, str] = {}  # this worker's test database → the template it was cloned from


@contextlib.contextmanager
def scratch_copy():
    """For a migration test: this thread's connection on a fresh copy of the template (~0.2 s) while it
    runs, the copy dropped after. Migrating the worker's own database forward again afterwards renders
    every model state (~10 s of CPU); dropping and cloning it instead would cut the connections other
    threads of this process keep to it (asgiref's executor thread's, say). Yields False where the
    database is not a clone (SQLite, or pytest-django's own setup): the test then migrates it back."""
    target = connection.settings_dict["NAME"]
    template = CLONED.get(target)
    if template is None:
        yield False
        return
    scratch = f"{target}_scratch"
    connection.close()
    with connection._nodb_cursor() as cursor:
        _fresh_copy(cursor, scratch, template)
    connection.settings_dict["NAME"] = scratch
    try:
        yield True
    finally:
        connection.close()
        connection.settings_dict["NAME"] = target
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(scratch)} WITH (FORCE)")


def drop_clone(name: str) -> None:
    """The worker's copy, gone at the session's end even if a process of a test still holds a
    connection to it (a stack or worker a failed test left behind): FORCE ends those sessions."""
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")


def delete_instead_of_truncate() -> None:
    """A transactional test's teardown empties every table. Django's PostgreSQL flush is one TRUNCATE of
    all of them, which gives each table new files: ~0.3 s on an idle machine and over a second under
    the suite's load, paid by every e2e test. DELETE of the few rows a test wrote takes ~0.03 s. The
    foreign keys Django makes on PostgreSQL are DEFERRABLE INITIALLY DEFERRED, so the order of the
    DELETEs does not matter; they are checked at the end, inside a block that starts over when the check
    fails: a worker or stack the test left behind may commit a row in a table already emptied that
    references a row deleted after it, and TRUNCATE would have waited for it where DELETE does not. A
    flush that must reset sequences (none here) keeps Django's TRUNCATE."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return [_deleting_block([self.quote_name(table) for table in sorted(tables)])]

    DatabaseOperations.sql_flush = sql_flush


FLUSH_ATTEMPTS = 20


def _deleting_block(quoted_tables: list[str]) -> str:
    """One statement: every table emptied (in name order, so a test can stop it between two), the
    foreign keys checked, again from the start (each DELETE
    sees the rows committed since) while a row committed meanwhile references one deleted."""
    # Django's own table names, each through quote_name.
    deletes = "\n".join(f"      DELETE FROM {table};" for table in quoted_tables)  # noqa: S608
    return f"""DO $flush$
BEGIN
  FOR attempt IN 1..{FLUSH_ATTEMPTS} LOOP
    BEGIN
      SET CONSTRAINTS ALL DEFERRED;
{deletes}
      SET CONSTRAINTS ALL IMMEDIATE;
      RETURN;
    EXCEPTION WHEN foreign_key_violation THEN
      NULL;
    END;
  END LOOP;
  RAISE EXCEPTION 'rows referencing deleted ones kept being committed: {FLUSH_ATTEMPTS} tries';
END
$flush$;"""
