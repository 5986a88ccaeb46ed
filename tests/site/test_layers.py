"""Apps import downward only: accounts < projects < notifications < profiles < runs < custody < api.

A module may import an app above its own only if it is a cross-app read view on top (the HTTP
pages, the dashboard, history and comparison), which compose what the apps below hold. Every
import counts, including one inside a function (a lazy import is still a dependency).
"""

import ast
from pathlib import Path

from tests.conftest import REPO

LAYERS = ["accounts", "projects", "notifications", "profiles", "runs", "custody", "api"]
READ_VIEWS_ON_TOP = {"views.py", "dashboard.py", "history.py", "compare.py"}


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


def upward_imports() -> dict[str, list[str]]:
    rank = {app: index for index, app in enumerate(LAYERS)}
    upward = {}
    for app in LAYERS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" in path.parts or path.name in READ_VIEWS_ON_TOP:
                continue
            above = sorted(name for name in imports_of(path) if rank.get(name, -1) > rank[app])
            if above:
                upward[str(path.relative_to(REPO))] = above
    return upward


def test_no_app_imports_an_app_above_it():
    assert upward_imports() == {}


def test_projects_is_the_bottom_and_imports_no_app():
    apps = set(LAYERS)
    for path in (REPO / "projects").rglob("*.py"):
        if "migrations" not in path.parts:
            assert not (imports_of(path) & (apps - {"projects"})), path


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The check can fail: a lazy import of custody inside a profiles module is found."""
    fake = tmp_path / "profiles"
    fake.mkdir()
    (fake / "sneaky.py").write_text("def f():\n    from custody.models import AuditEntry\n    return AuditEntry\n")
    for app in LAYERS:
        if app != "profiles":
            (tmp_path / app).mkdir()
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert upward_imports() == {"profiles/sneaky.py": ["custody"]}
