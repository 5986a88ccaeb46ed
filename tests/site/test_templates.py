"""Templates stay readable in a diff: no line over 200 characters. Django's template tags
cannot span lines, so a fold goes between words, between attributes or between elements."""

from tests.conftest import REPO

LIMIT = 200


def test_no_template_line_is_longer_than_the_limit():
    long = [
        f"{path.relative_to(REPO)}:{number} ({len(line)} characters)"
        for path in sorted((REPO / "templates").rglob("*.html"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if len(line) > LIMIT
    ]
    assert long == []


def test_every_template_still_compiles():
    from django.template import engines

    engine = engines["django"]
    for path in sorted((REPO / "templates").rglob("*.html")):
        engine.get_template(str(path.relative_to(REPO / "templates")))
