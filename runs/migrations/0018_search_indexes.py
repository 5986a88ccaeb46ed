"""History's search (run id, title, command: substrings; commits and config hash: prefixes of the bound commit and config hash) served by
indexes on PostgreSQL, so a search costs the same at 100,000 runs as at 1,000 (issue 19).

Trigram GIN indexes (pg_trgm, a trusted extension since PostgreSQL 13) on exactly the expressions
Django's icontains writes, and pattern-ops B-trees for startswith. Where the extension cannot be
created the trigram indexes are skipped (the search still works, by a scan). SQLite: nothing.
"""

from django.db import migrations, transaction
from django.db.utils import DatabaseError

TRIGRAM = {
    "run_search_run_id": "upper((run_id)::text) gin_trgm_ops",
    "run_search_title": "upper((title)::text) gin_trgm_ops",
    "run_search_command": "upper((command)::text) gin_trgm_ops",
}
PREFIX = {
    "run_search_resolved_commit": "resolved_commit varchar_pattern_ops",
    "run_search_config_sha256": "config_sha256 varchar_pattern_ops",
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
    for name, expression in PREFIX.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON runs_run ({expression})")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in [*TRIGRAM, *PREFIX]:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("runs", "0017_kept_totals")]

    operations = [migrations.RunPython(create, drop)]
