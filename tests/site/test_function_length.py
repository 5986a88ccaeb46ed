"""No function of the product (every package in the layers, the benchmarks) is over 50 lines: one that
grows past it does more than one thing. Migrations and tests are not counted."""

import ast
from pathlib import Path

from tests.conftest import REPO
from tests.site.test_layers import LAYERS

MOST_LINES = 50


def long_functions(roots: list[Path]) -> dict[str, int]:
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = node.end_lineno - node.lineno + 1
                    if length > MOST_LINES:
                        found[f"{path.relative_to(root.parent)}:{node.name}"] = length
    return found


def test_no_function_is_over_fifty_lines():
    assert long_functions([REPO / name for name in [*LAYERS, "bench"]]) == {}


def test_the_check_sees_a_long_function(tmp_path):
    (tmp_path / "long.py").write_text("def f():\n" + "    x = 1\n" * 60)
    assert list(long_functions([tmp_path]).values()) == [61]
