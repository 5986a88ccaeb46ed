"""The wrapper is a package (one module per subcommand, one dispatch table) shipped as one stdlib
file: the build hoists stdlib imports, drops the package's own, and refuses what one file cannot hold."""

import ast
import os
import shutil
import subprocess
import sys

import pytest

from node import build
from node.protocol import ANSWERS
from wrapper.main import COMMANDS


def test_the_shipped_file_is_one_stdlib_file_a_box_runs():
    source = build.wrapper_source()
    tree = ast.parse(source, feature_version=(3, 8))  # the oldest Python a box may have
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a package import left in the shipped file"
            assert node.module.split(".")[0] in sys.stdlib_module_names, node.module
        elif isinstance(node, ast.Import):
            assert all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in node.names)
    result = subprocess.run([sys.executable, "-I", "-S", str(build.wrapper_file())], capture_output=True, text=True)
    assert result.returncode == 2
    listed = {line.split()[0] for line in result.stderr.splitlines()[1:]}
    assert listed == set(COMMANDS)


def test_every_answer_the_protocol_reads_has_a_subcommand_and_each_lives_in_its_own_module():
    assert set(COMMANDS) == set(ANSWERS) | {"run", "follow", "node"}  # node: started by srun, not the protocol
    for name, (function, _) in COMMANDS.items():
        assert function.__module__ == f"wrapper.{name.replace('-', '_')}", name


def test_a_wrong_argument_count_is_the_usage_not_a_traceback(tmp_path):
    for argv in (["idle"], ["status", "a", "b"], ["nonsense", "x"]):
        result = subprocess.run([sys.executable, str(build.wrapper_file()), *argv], capture_output=True, text=True)
        assert (result.returncode, result.stderr.splitlines()[0]) == (2, "usage: remotegpu_wrapper.py SUBCOMMAND ...")


@pytest.fixture
def package(tmp_path):
    copy = tmp_path / "wrapper"
    shutil.copytree(build.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_version_is_the_content(package):
    assert build.build(package) == build.wrapper_source()
    (package / "idle.py").write_text((package / "idle.py").read_text() + "\n\nIDLE_NOTE = 1\n")
    assert build.build(package) != build.wrapper_source()


def test_one_name_in_two_modules_is_refused(package):
    (package / "extra.py").write_text('"""A second expand."""\n\n\ndef expand(path):\n    return path\n')
    with pytest.raises(build.BuildError, match="expand is defined in both extra.py and files.py"):
        build.build(package)


def test_modules_importing_each_other_in_a_circle_are_refused(package):
    (package / "left.py").write_text('"""Left."""\n\nfrom .right import b\n\n\ndef a():\n    return b\n')
    (package / "right.py").write_text('"""Right."""\n\nfrom .left import a\n\n\ndef b():\n    return a\n')
    with pytest.raises(build.BuildError, match="circle: left -> right -> left"):
        build.build(package)


def test_the_file_uploaded_lives_in_a_directory_only_this_process_can_write():
    """Not a fixed name in a shared /tmp, which another user of the control host could plant first."""
    path = build.wrapper_file()
    assert path.read_text() == build.wrapper_source() and path.name == build.wrapper_name()
    assert path.parent.stat().st_mode & 0o777 == 0o700 and path.parent.stat().st_uid == os.getuid()
