"""docs/ARCHITECTURE.md's map is what `bin/house --map` prints from the code now (floors, apps, imports),
so the page cannot drift from the house (before, 14 of its 18 rows differed)."""

import importlib.machinery
import importlib.util
import re

from tests.conftest import REPO


def house_map() -> str:
    loader = importlib.machinery.SourceFileLoader("house", str(REPO / "bin" / "house"))
    spec = importlib.util.spec_from_loader("house", loader)
    house = importlib.util.module_from_spec(spec)
    loader.exec_module(house)
    return house.house(sizes=False)


def test_the_architecture_map_is_the_houses():
    page = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    drawn = re.search(r"## The map\n.*?```\n(.*?)\n```", page, re.S)
    assert drawn, "ARCHITECTURE.md has a map in a fenced block under '## The map'"
    assert drawn.group(1) == house_map()
