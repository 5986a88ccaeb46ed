"""Apps import downward only, in the order of LAYERS below (node at the bottom, remotegpu_site on top). No
file is exempt: the pages that combine apps live in console/; remotegpu_site, on top, wires them (settings,
URLs, routing, the Celery app) and no app imports it; every import counts, including one inside a function
(a lazy import is still a dependency). Every package of the tree takes a place, whether or not it is a
Django app.
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

LAYERS = [
    "wrapper",  # the box-side program, built into the one stdlib file a box runs (node/build.py); no Django
    "node",  # the node library: transport, protocol, pull, the wrapper's build; no Django
    "platforms",  # the platform facts: profiles, schema, catalog, hooks, layout; no Django
    "core",
    "providers",  # one adapter per provider (providers/<name>/), the HTTP exchange and how answers read
    "accounts",
    "projects",
    "notifications",
    "fleet",
    "datasets",
    "runs",
    "watching",
    "custody",  # VERIFY: custody records, the copies of a sealed export, readback
    "delivery",  # DELIVER: teardown requests, their proofs, execution and effects; waste alarms
    "rentals",
    "console",
    "remotegpu",  # the command-line client
    "api",
    "remotegpu_site",
]


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
            if "migrations" in path.parts:
                continue
            above = sorted(name for name in imports_of(path) if rank.get(name, -1) > rank[app])
            if above:
                upward[str(path.relative_to(REPO))] = above
    return upward


def test_no_app_imports_an_app_above_it():
    assert upward_imports() == {}


def test_core_imports_no_app_only_the_node_library():
    apps = set(LAYERS)
    for path in (REPO / "core").rglob("*.py"):
        assert not (imports_of(path) & (apps - {"core", "node", "wrapper"})), path


@pytest.mark.parametrize("library", ["wrapper", "node", "platforms"])
def test_the_kit_floor_is_plain_python(library):
    """The box-side program is the standard library and itself. The node library takes what it needs as
    arguments (an endpoint, a key, a host key), never a model or a setting: the fleet (fleet/node_client.py)
    calls it. The platform facts are data and pure rules."""
    above = set(LAYERS[LAYERS.index(library) + 1 :])
    for path in (REPO / library).rglob("*.py"):
        assert not (imports_of(path) & (above | {"django", "celery", "channels"})), path


def test_every_package_is_in_a_layer():
    """A new app or package must take its place here: one left out would be checked against nothing."""
    packages = {path.parent.name for path in REPO.glob("*/__init__.py")} - {"tests"}
    installed = {path.parent.name for path in REPO.glob("*/apps.py")}
    assert packages | installed == set(LAYERS)


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The check can fail: a lazy import of custody inside a fleet module is found."""
    fake = tmp_path / "fleet"
    fake.mkdir()
    (fake / "sneaky.py").write_text("def f():\n    from custody.models import AuditEntry\n    return AuditEntry\n")
    for app in LAYERS:
        if app != "fleet":
            (tmp_path / app).mkdir()
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert upward_imports() == {"fleet/sneaky.py": ["custody"]}
