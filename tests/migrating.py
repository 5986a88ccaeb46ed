"""Migration tests: move the test database to a past state and back."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """Migrate to targets, every other app at its newest; the models as of that state."""
    executor = MigrationExecutor(connection)
    named = {app for app, _ in targets}
    targets = targets + [node for node in executor.loader.graph.leaf_nodes() if node[0] not in named]
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps
