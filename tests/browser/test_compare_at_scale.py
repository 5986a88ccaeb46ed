"""Comparing a sweep of six runs (two configurations × three seeds) in headless Chromium at 1,280 px
(issue 49): the tables scroll inside their card instead of being clipped at its edge, and the charts
carry one key line per group (its colour, its letter, its runs) instead of a legend of a line or more
per run under every chart."""

import pytest
from django.conf import settings
from django.urls import reverse

from runs.models import RunState
from tests import factories
from tests.browser.conftest import read_in_chromium
from tests.conftest import ARTIFACTS
from tests.runs.test_replicates import verified

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]  # it starts its own Chromium

MEASURE = """
    page.wait_for_selector("#compare-plots figure.curve")
    lines = page.evaluate(
        "[...document.querySelectorAll('#compare-plots .key-line')].map(l => ({text: l.textContent,"
        " height: l.getBoundingClientRect().height, colour: l.querySelector('.swatch').style.background}))"
    )
    wide = page.evaluate(
        "[...document.querySelectorAll('section.card')].filter(c => c.scrollWidth > c.clientWidth).map(c => c.id)"
    )
    verdicts = page.evaluate(
        "({bottom: document.querySelector('#verdicts').getBoundingClientRect().bottom,"
        " said: [...document.querySelectorAll('#verdicts li')].map(li => li.textContent.replace(/\\s+/g, ' ').trim())})"
    )
    page.screenshot(path=SHOT, full_page=True)
    print(json.dumps({"verdicts": verdicts, "lines": lines, "legends": page.locator("#compare-plots .u-legend").count(),
                      "charts": page.locator("#compare-plots figure.curve").count(), "wide": wide,
                      "line_height": page.evaluate("parseFloat(getComputedStyle(document.body).fontSize)")}))
"""


def test_a_six_run_sweep_has_one_key_line_per_group_and_no_clipped_card(client, live_server, bob, tmp_path):
    box = factories.box(factories.project(bob), host="203.0.113.9", user="root", state="running")
    runs = []
    for lr in (0.01, 0.1):
        for seed in (7, 8, 9):
            curve = [{"epoch": epoch, "val_loss": lr + 1 / (epoch + seed)} for epoch in range(1, 6)]
            run = factories.run(
                box,
                state=RunState.EXPORTED,
                title=f"lr {lr} seed {seed}, warm-up 500 steps, cosine decay, batch 64",
                curve=curve,
            )
            verified(run, tmp_path, 0.9 + lr, {"seed": seed, "lr": lr, "epochs": 5})
            runs.append(run)
    client.force_login(bob)
    query = "&".join(f"run={run.run_id}" for run in runs)
    url = f"{live_server.url}{reverse('run-compare')}?{query}"
    ARTIFACTS.mkdir(exist_ok=True)
    script = MEASURE.replace("SHOT", repr(str(ARTIFACTS / "compare-sweep.png")))
    seen = read_in_chromium(script, url, client.cookies[settings.SESSION_COOKIE_NAME].value)
    assert seen["charts"] >= 1 and seen["legends"] == 0, seen  # no per-chart legend past two runs
    assert [line["text"].split(" · ")[0] for line in seen["lines"]] == ["A", "B"], seen
    first, second = seen["lines"]
    assert first["text"].startswith("A · 3 runs: ") and all(run.run_id in first["text"] for run in runs[:3])
    assert all(run.run_id in second["text"] for run in runs[3:]) and first["colour"] != second["colour"]
    assert all(line["height"] < 2 * seen["line_height"] for line in seen["lines"]), seen  # one line each
    assert seen["wide"] == [], seen
    # The verdicts sit on the first screen at 1,280×800 (before: below six tables), one line per pair.
    assert seen["verdicts"]["bottom"] <= 800 and len(seen["verdicts"]["said"]) >= 1, seen["verdicts"]
    assert all(" B − A Δ = " in line for line in seen["verdicts"]["said"]), seen["verdicts"]
