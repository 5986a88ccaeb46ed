"""Every code name a doc writes in backticks exists: a dotted name (`module.function`, `Class.method`) or a
snake_case name is one this repository defines, writes as a string (an alert, a JSON key), or a library
we import defines (each such bare name listed below with where it lives, and that place checked). Before,
ARCHITECTURE named `teardown._apply_effects`, `job_of` and `register_volume`, none of which existed."""

import ast
import importlib
import re

import pytest

from tests.conftest import REPO

DOCS = ["README.md", *sorted(str(path.relative_to(REPO)) for path in (REPO / "docs").glob("*.md"))]
CODE = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z]+_[a-z_0-9]+)(?:\(\))?`")
FILES = (".py", ".md", ".html", ".js", ".yaml", ".json", ".sh", ".css", ".txt", ".csv", ".pth", ".pt", ".toml")
# Library names the docs write bare, each with the importable place that defines it.
LIBRARY = {
    "select_for_update": "django.db.models.QuerySet.select_for_update",
    "worker_init": "celery.signals.worker_init",
    "broadcast_object_list": "torch.distributed.broadcast_object_list",
    "destroy_process_group": "torch.distributed.destroy_process_group",
    "extend_schema": "drf_spectacular.utils.extend_schema",
    "ipaddress.is_global": "ipaddress.IPv4Address.is_global",
}


def defined_here() -> set[str]:
    """Every name the repository's Python defines, assigns, takes as an argument or writes as a string."""
    found = set()
    for path in REPO.rglob("*.py"):
        if {".venv", "node_modules", "var"} & set(path.relative_to(REPO).parts) or path.samefile(__file__):
            continue  # this file writes the stale names it checks for
        found.add(path.stem)
        found.update(path.relative_to(REPO).parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                found.add(node.attr)
            elif isinstance(node, ast.arg) or isinstance(node, ast.keyword) and node.arg:
                found.add(node.arg)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(re.findall(r"[A-Za-z_]\w*", node.value))
    return found


def importable(name: str) -> bool:
    """Whether a dotted name is a module of an installed library, followed by attributes it has."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def unknown_names(text: str, known: set[str]) -> set[str]:
    names = {name for name in CODE.findall(text) if not name.endswith(FILES)}
    return {
        name
        for name in names
        if not set(name.split(".")) <= known and not importable(name) and not importable(LIBRARY.get(name, "-"))
    }


@pytest.fixture(scope="module")
def known():
    return defined_here()


def test_every_code_name_the_docs_write_exists(known):
    missing = {(doc, name) for doc in DOCS for name in unknown_names((REPO / doc).read_text(), known)}
    assert missing == set()


def test_the_check_sees_a_name_that_is_gone_and_the_library_list_is_true(known):
    assert unknown_names("then `teardown._apply_effects` and `job_of`", known) == {"teardown._apply_effects", "job_of"}
    assert unknown_names("`fleet.slurm_jobs.jobs_of` and `transaction.on_commit`", known) == set()
    assert [name for name, place in LIBRARY.items() if not importable(place)] == []
