"""Every task an action or a view sends by name (core.enqueue) is a task the worker has registered.

Sending by name keeps tasks.py above actions.py (no actions ↔ tasks circle), but a name is a string:
a renamed or misspelt task would only fail in a queue. This reads every `send(...)`/`after_commit(...)`
call in the apps and checks its first argument against the Celery app's registry.
"""

import ast

from tests.conftest import REPO
from tests.site.test_layers import LAYERS


def sent_names() -> dict[str, str]:
    found = {}
    for app in LAYERS:
        for path in sorted((REPO / app).rglob("*.py")):
            tree = ast.parse(path.read_text())
            seam = {
                alias.asname or alias.name
                for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "core.enqueue"
                for alias in node.names
            }
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) in seam:
                    first = node.args[0] if node.args else None
                    where = f"{path.relative_to(REPO)}:{node.lineno}"
                    assert isinstance(first, ast.Constant) and isinstance(first.value, str), f"{where}: not a name"
                    found[where] = first.value
    return found


def test_every_task_sent_by_name_is_registered():
    from remotegpu_site.celery import app

    app.loader.import_default_modules()
    sent = sent_names()
    assert len(sent) >= 20, sent  # the seam is used: the actions send through it
    unknown = {where: name for where, name in sent.items() if name not in app.tasks}
    assert unknown == {}


def test_no_action_or_view_imports_a_tasks_module():
    for app in LAYERS:
        for path in sorted((REPO / app).rglob("*.py")):
            if path.name == "tasks.py" or "migrations" in path.parts or "tests" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = {alias.name for alias in node.names}
                    assert not node.module.endswith(".tasks") and "tasks" not in names, path
