"""The shipped wrapper: the `wrapper` package made into the one stdlib file a box runs.

A box gets one file (`wrapper-<sha>.py`, never overwritten), so that a live run never has code it
imports changed under it and nothing needs installing there. Here the wrapper is a package, one
module per subcommand; this joins them: the stdlib imports hoisted, the package's own imports
dropped, the modules in dependency order, `main` last. Two modules defining one name would
shadow each other in one file, so that is refused here rather than found on a box.
"""

import ast
import atexit
import functools
import hashlib
import shutil
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "wrapper"  # the box-side program, a room of its own
HELPER = PACKAGE / "run_helper" / "remotegpu_run.py"  # embedded: the wrapper writes it on the box


class BuildError(Exception):
    """The wrapper package cannot be made into one file."""


def _module(path: Path) -> dict:
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop, stdlib, needs = set(), set(), set()
    for index, node in enumerate(tree.body):
        is_docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if isinstance(node, ast.ImportFrom) and node.level:
            needs.add(node.module)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            stdlib.add(ast.get_source_segment(source, node))
        elif not is_docstring:
            continue
        drop.update(range(node.lineno - 1, node.end_lineno))
    names = set().union(*(_defined_by(node) for node in tree.body))
    body = "".join(line for number, line in enumerate(lines) if number not in drop).strip("\n")
    doc = ast.get_docstring(tree) or ""
    return {"name": path.stem, "doc": doc, "stdlib": stdlib, "needs": needs, "names": names, "body": body}


def _defined_by(node) -> set[str]:
    """The top-level names one statement of a module defines."""
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {name.id for target in node.targets for name in ast.walk(target) if isinstance(name, ast.Name)}
    return set()


def _in_dependency_order(modules: dict[str, dict]) -> list[dict]:
    ordered, placed = [], set()

    def place(name, chain=()):
        if name in placed:
            return
        if name in chain:
            raise BuildError(f"the wrapper's modules import each other in a circle: {' -> '.join((*chain, name))}")
        if name not in modules:
            raise BuildError(f"{chain[-1]} imports .{name}, which is not a module of the wrapper")
        for needed in sorted(modules[name]["needs"]):
            place(needed, (*chain, name))
        placed.add(name)
        ordered.append(modules[name])

    for name in sorted(modules):
        place(name)
    return ordered


def build(package: Path = PACKAGE) -> str:
    """The one file: the package's docstring, every stdlib import once, each module's code."""
    modules = {path.stem: _module(path) for path in sorted(package.glob("*.py")) if path.stem != "__init__"}
    seen: dict[str, str] = {}
    for module in modules.values():
        for name in sorted(module["names"]):
            if name in seen:
                raise BuildError(f"{name} is defined in both {seen[name]}.py and {module['name']}.py")
            seen[name] = module["name"]
    ordered = _in_dependency_order(modules)
    imports = sorted(set().union(*(module["stdlib"] for module in ordered)))
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    parts = ["#!/usr/bin/env python3\n", f'"""{doc}\n"""\n\n', "\n".join(imports), "\n"]
    parts.append(f"\nRUN_HELPER_SOURCE = {HELPER.read_text()!r}\n")
    for module in ordered:
        parts.append(f"\n\n# --- {module['name']}: {module['doc'].splitlines()[0] if module['doc'] else ''}\n\n")
        parts.append(module["body"] + "\n")
    text = "".join(parts)
    compile(text, "remotegpu_wrapper.py", "exec")  # a syntax error is found here, not on a box
    return text


@functools.cache
def wrapper_source() -> str:
    return build()


@functools.cache
def wrapper_version() -> str:
    # Versioned by content: a new wrapper is a new file; a live run's file is never rewritten.
    return hashlib.sha256(wrapper_source().encode()).hexdigest()[:12]


def wrapper_name() -> str:
    return f"wrapper-{wrapper_version()}.py"


@functools.cache
def wrapper_file() -> Path:
    """The built wrapper as a file on the control host (what an upload sends), written once per process
    into a directory of its own (mode 0700): never a shared name in /tmp that another user of the host
    could plant or swap before it is uploaded to a box."""
    directory = Path(tempfile.mkdtemp(prefix="remotegpu-wrapper-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / wrapper_name()
    path.write_text(wrapper_source())
    return path
