from django.apps import AppConfig
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Projects and runs"

    def ready(self):
        from projects.membership import access_reduced as access_reduced_signal
        from runs.search import ensure_sqlite_index

        # A removal closes the person's open sockets when it commits (not up to
        # LIVE_REAUTH_SECONDS later).
        access_reduced_signal.connect(_close_sockets, dispatch_uid="runs-close-sockets")

        # SQLite drops a table's triggers when a migration rebuilds it: the search index is checked after.
        post_migrate.connect(ensure_sqlite_index, sender=self)


def _close_sockets(sender, user_id, **kwargs):
    from fleet.live import access_reduced

    access_reduced(user_id)
