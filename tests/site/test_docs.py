"""The docs name files that exist: a path in backticks in the README or any page under docs/ is a
file of the repository (from its root, or inside an app where the docs speak of that app's files);
a link from one page to another, or to a picture, points at a file that is there; the README fits
a screen or two (it links to docs/ for the rest)."""

import re

from tests.conftest import REPO

DOCS = ["README.md", *sorted(str(path.relative_to(REPO)) for path in (REPO / "docs").glob("*.md"))]
PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|html|js|yaml|md|sh|css))[`:]")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
README_MOST_LINES = 150


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
    assert named_paths("the wrapper (`node/remotegpu_wrapper.py`) and `x`") == {"node/remotegpu_wrapper.py"}
    assert not (REPO / "node/remotegpu_wrapper.py").exists()


def test_every_link_between_the_docs_points_at_a_file():
    broken = {
        (doc, target)
        for doc in DOCS
        for target in LINK.findall((REPO / doc).read_text())
        if "://" not in target and not ((REPO / doc).parent / target).exists()
    }
    assert broken == set()
    assert "docs/runs.md" in LINK.findall((REPO / "README.md").read_text())


def test_the_readme_fits_and_links_every_page_of_the_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MOST_LINES
    linked = set(LINK.findall(readme))
    pages = {doc for doc in DOCS if doc != "README.md"}
    assert pages - linked == set()


def test_the_readmes_test_figures_come_from_the_run_that_orders_the_suite():
    """tests/module_durations.json is copied from the last full run's table (tests/scheduling.py): the
    README's worker-seconds and module count are that run's, not a figure typed from an older one."""
    import json

    table = json.loads((REPO / "tests" / "module_durations.json").read_text())
    readme = (REPO / "README.md").read_text()
    figure = re.search(r"([\d,]+) worker-seconds over (\d+) modules", readme)
    assert figure, "the README's test table names the worker-seconds and modules of its run"
    assert int(figure.group(1).replace(",", "")) == round(sum(table.values()))
    assert int(figure.group(2)) == len(table)
