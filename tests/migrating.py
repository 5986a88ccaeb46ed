"""Migration tests: move the test database to a past state and back."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets):
    """Migrate the named apps to targets, every other app to its newest migration that is compatible
    with them (a later one may depend on a migration the targets undo); the models as of that state."""
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    named = dict(targets)
    allowed = {node for target in targets for node in graph.forwards_plan(target)}

    def compatible(node) -> bool:
        return all(app not in named or (app, name) in allowed for app, name in graph.forwards_plan(node))

    full = list(targets)
    for leaf in graph.leaf_nodes():
        if leaf[0] in named:
            continue
        node = leaf
        while node is not None and not compatible(node):
            parents = [parent.key for parent in graph.node_map[node].parents if parent.key[0] == node[0]]
            node = parents[0] if parents else None
        full.append(node or (leaf[0], None))
    executor.migrate(full)
    executor.loader.build_graph()
    # An app migrated to nothing (None) has no state to build: it is simply absent from the models.
    return executor.loader.project_state([node for node in full if node[1] is not None]).apps
