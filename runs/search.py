"""History's search box: a substring of a run's id, title or command, or a prefix of its bound commit
or config hash — answered from an index on either database, so it costs the same at any history size.

PostgreSQL: trigram GIN indexes on the very expressions the lookups below write (migration 0018).
SQLite: an FTS5 trigram table over run id, title and command, kept by triggers. Both: a hex prefix
is a range on an indexed column (`Run.Meta.indexes`). SQLite drops a table's triggers when a migration
rebuilds the table, so `ensure_sqlite_index` (after every migrate) recreates and refills whatever
is missing.
"""

from django.db import connection
from django.db.models import Q, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

TABLE = "runs_run_search"
# Fixed SQL (no value is ever formatted into it): the table, its triggers, and the one query.
CREATE_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS runs_run_search USING fts5(run_id, title, command, "
    "content='runs_run', content_rowid='id', tokenize='trigram')"
)
TRIGGERS = {
    "runs_run_search_ai": "AFTER INSERT ON runs_run BEGIN "
    "INSERT INTO runs_run_search(rowid, run_id, title, command) VALUES (new.id, new.run_id, new.title, new.command); "
    "END",
    "runs_run_search_ad": "AFTER DELETE ON runs_run BEGIN "
    "INSERT INTO runs_run_search(runs_run_search, rowid, run_id, title, command) "
    "VALUES ('delete', old.id, old.run_id, old.title, old.command); END",
    "runs_run_search_au": "AFTER UPDATE OF run_id, title, command ON runs_run BEGIN "
    "INSERT INTO runs_run_search(runs_run_search, rowid, run_id, title, command) "
    "VALUES ('delete', old.id, old.run_id, old.title, old.command); "
    "INSERT INTO runs_run_search(rowid, run_id, title, command) VALUES (new.id, new.run_id, new.title, new.command); "
    "END",
}
REBUILD = "INSERT INTO runs_run_search(runs_run_search) VALUES ('rebuild')"
MATCH = "SELECT rowid FROM runs_run_search WHERE runs_run_search MATCH %s"
HEX_RANGE = "SELECT id FROM runs_run WHERE {field} >= %s AND {field} < %s"  # field: one of HEX_FIELDS
HEX_FIELDS = ("resolved_commit", "config_sha256")  # the bound commit and config hash: lowercase hex


def ensure_sqlite_index(using="default", **kwargs) -> None:
    """Create the SQLite search table and triggers if any is missing, and refill it from runs_run."""
    from django.db import connections

    db = connections[using]
    if db.vendor != "sqlite":
        return
    with db.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE %s", [f"{TABLE}%"])
        present = {row[0] for row in cursor.fetchall()}
        if TABLE in present and set(TRIGGERS) <= present:
            return
        cursor.execute(CREATE_TABLE)
        for name, body in TRIGGERS.items():
            cursor.execute("DROP TRIGGER IF EXISTS " + name)
            cursor.execute("CREATE TRIGGER " + name + " " + body)
        cursor.execute(REBUILD)


def _hex_range(query: str) -> tuple[str, str] | None:
    """A prefix of a lowercase hex identifier as [low, high): a range an ordinary index serves."""
    low = query.lower()
    if not low or any(c not in "0123456789abcdef" for c in low):
        return None
    return low, low[:-1] + chr(ord(low[-1]) + 1)


def matching(runs, query: str):
    """The runs whose id, title or command contains query, or whose commit or config hash starts with it."""
    hexes = _hex_range(query)
    if connection.vendor == "sqlite" and len(query) >= 3:  # a trigram index needs three characters
        # One id list, so SQLite looks the few matches up instead of walking the history in order.
        sql, params = [MATCH], ['"' + query.replace('"', '""') + '"']
        if hexes:
            sql += [HEX_RANGE.format(field=field) for field in HEX_FIELDS]
            params += [bound for _ in HEX_FIELDS for bound in hexes]
        return runs.filter(pk__in=RawSQL(" UNION ".join(sql), params))  # noqa: S611 — fixed SQL, bound values
    text = Q(run_id__icontains=query) | Q(title__icontains=query) | Q(command_text__icontains=query)
    for field in HEX_FIELDS if hexes else ():
        text |= Q(**{f"{field}__gte": hexes[0], f"{field}__lt": hexes[1]})
    return runs.annotate(command_text=Cast("command", TextField())).filter(text)
