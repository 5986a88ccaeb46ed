"""History's substring search (run id, title, command) served by indexes on PostgreSQL, so a search
costs the same at 100,000 runs as at 1,000.

Trigram GIN indexes (pg_trgm, a trusted extension since PostgreSQL 13) on exactly the expressions
Django's icontains writes. Where the extension cannot be created they are skipped (the search
still works, by a scan). SQLite's search table is kept by runs/search.py.
"""

from django.db import migrations, transaction
from django.db.utils import DatabaseError

TRIGRAM = {
    "run_search_run_id": "upper((run_id)::text) gin_trgm_ops",
    "run_search_title": "upper((title)::text) gin_trgm_ops",
    "run_search_command": "upper((command)::text) gin_trgm_ops",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic():
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        trigram = TRIGRAM
    except DatabaseError:
        trigram = {}
    for name, expression in trigram.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON runs_run USING gin ({expression})")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in TRIGRAM:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0017_kept_totals")]

    operations = [migrations.RunPython(create, drop)]
