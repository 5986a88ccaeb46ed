from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Projects and runs"

    def ready(self):
        from runs.roles import ensure_role_groups
        from runs.search import ensure_sqlite_index

        # Permissions exist only after post_migrate; the groups are (re)built from them there.
        post_migrate.connect(ensure_role_groups, sender=self)
        # SQLite drops a table's triggers when a migration rebuilds it: the search index is checked after.
        post_migrate.connect(ensure_sqlite_index, sender=self)
