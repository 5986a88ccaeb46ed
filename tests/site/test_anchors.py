"""A name is checked whole: "^…$" lets a trailing newline through ("val\\n" stored as a test id, "model\\n" as a
weights key), so every pattern anchored at both ends ends in \\Z (or is a line reader, MULTILINE)."""

import ast
from pathlib import Path

from tests.conftest import REPO
from tests.site.test_digits import PRODUCT


def loose_anchors(path: Path, root: Path = REPO) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if not (call and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args):
            continue
        pattern, flags = node.args[0], ast.unparse(node.args[1]) if len(node.args) > 1 else ""
        if node.func.attr not in ("compile", "match", "search") or not isinstance(pattern, ast.Constant):
            continue
        text = pattern.value if isinstance(pattern.value, str) else ""
        if text.endswith("$") and not text.endswith("\\$") and "MULTILINE" not in flags:
            found.append(f"{path.relative_to(root)}:{node.lineno} {text}")
    return found


def test_every_anchored_pattern_refuses_a_trailing_newline():
    assert [found for path in PRODUCT for found in loose_anchors(path)] == []


def test_the_walk_finds_a_loose_anchor(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text('import re\nNAME = re.compile(r"^[a-z]+$")\nOK = re.compile(r"^[a-z]+\\Z")\n')
    assert loose_anchors(sneaky, tmp_path) == ["sneaky.py:2 ^[a-z]+$"]
