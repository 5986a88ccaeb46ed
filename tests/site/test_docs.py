"""The docs name files that exist: a path in backticks in the README, ARCHITECTURE or SECURITY is a
file of the repository (from its root, or inside an app where the docs speak of that app's files)."""

import re

from tests.conftest import REPO

DOCS = ["README.md", "docs/ARCHITECTURE.md", "docs/SECURITY.md"]
PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|html|js|yaml|md|sh|css))[`:]")


def named_paths(text: str) -> set[str]:
    return set(PATH.findall(text))


def test_every_file_the_docs_name_exists():
    apps = [path.parent for path in REPO.glob("*/apps.py")]
    missing = {
        (doc, path)
        for doc in DOCS
        for path in named_paths((REPO / doc).read_text())
        if not (REPO / path).exists() and not any((app / path).exists() for app in apps)
    }
    assert missing == set()


def test_the_check_sees_a_path_that_is_gone():
    assert named_paths("the wrapper (`profiles/node/remotegpu_wrapper.py`) and `x`") == {
        "profiles/node/remotegpu_wrapper.py"
    }
    assert not (REPO / "profiles/node/remotegpu_wrapper.py").exists()
