"""A real replicate sweep: tinyfit, 2 learning rates × 3 seeds as six runs on the loopback box, every
cell verified in custody, plus a lone base run; the compare page, read by headless Chromium, shows each
configuration's interval over its seeds and labels each pair, checked against a hand computation
here; the lone run's pairs say unknown."""

import math
import statistics
import time

import pytest
from django.conf import settings
from django.urls import reverse

from custody.actions import do_start_verification
from custody.copies import latest_verified
from runs.actions.lifecycle import do_start_preflight
from runs.models import RunState, Sweep
from tests.browser.conftest import read_in_chromium
from tests.runs.conftest import set_config, wait_state
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# Chromium in a process of its own: Playwright's sync API runs an event loop in its thread, and Django
# refuses database calls from such a thread (this test's, and its teardown's).
READ_PAGE = """
    page.wait_for_selector("#seed-stats")
    rows = {r.get_attribute("data-pair"): r.inner_text() for r in page.query_selector_all("#seed-stats tr.pair")}
    metric_rows = page.query_selector_all("#seed-stats tr[data-metric]")
    cells = {r.get_attribute("data-metric"): r.inner_text() for r in metric_rows}
    # Issue 49: at 1,280 px no card's content is wider than the card (tables of many runs scroll inside it).
    wide = page.evaluate(
        "[...document.querySelectorAll('section.card')].filter(c => c.scrollWidth > c.clientWidth)"
        ".map(c => c.id || c.querySelector('h2').innerText)"
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    print(json.dumps({"pairs": rows, "cells": cells, "rule": page.inner_text("#rule"), "wide": wide, "width": width}))
"""

T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}


def hand_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """Δ = mean(b) − mean(a) and the half-width of its 95% Welch interval, written out by hand."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    low = max(1, min(int(df), 7))
    t = T975[low] + (T975[low + 1] - T975[low]) * (df - low) if df < 8 else T975[8]
    return statistics.mean(b) - statistics.mean(a), t * math.sqrt(va + vb)


def accuracy_of(run) -> float:
    record = latest_verified(run)
    return next(m["recomputed"] for m in record.evidence["metrics"] if m["name"] == "accuracy")


@pytest.mark.timeout(900)  # seven real runs and their custody: 4 min alone, more on a loaded machine
def test_a_replicate_sweep_is_compared_with_intervals_and_labels_in_the_browser(
    client, live_server, bob, make_run, instance, source, celery_worker_process
):
    set_config(source, epochs=3, lr=0.02)
    base = make_run(title="lr 0.02, one seed")
    do_start_preflight(base.pk, actor=bob)
    client.force_login(bob)
    form = {
        "name": "lr × seeds",
        "base_run": base.run_id,
        "instances": [instance.pk],
        "gpus_per_box": 3,
        "independent": "on",
        "overrides": "[{lr: 0.01}, {lr: 0.2}]",
        "seeds": 3,
    }
    assert client.post(reverse("sweep-create"), form).status_code == 302
    sweep = Sweep.objects.get()
    cells = list(sweep.cells.order_by("cell"))
    assert [c.config_overrides for c in cells] == [{"lr": lr, "seed": seed} for lr in (0.01, 0.2) for seed in (7, 8, 9)]
    everything = [base, *cells]
    settled = {RunState.EXPORTED, RunState.QUARANTINED, RunState.FAILED_SMOKE}
    for run in everything:
        # Arming watchers as beat does (CI: a watcher lost on a loaded machine left a run "running" for 600 s
        # with nothing to re-arm it).
        assert wait_state(run, settled, timeout=600, refresh=True).state == RunState.EXPORTED
    records = [do_start_verification(run.pk, actor=bob) for run in everything]
    done = lambda: all(r.refresh_from_db() or r.status in ("verified", "failed") for r in records)  # noqa: E731
    wait_until(done, 600, 0.5, what="custody of every run")
    assert [r.status for r in records] == ["verified"] * 7, [r.failure for r in records]
    for run in everything:
        run.refresh_from_db()
    a = [accuracy_of(run) for run in cells[:3]]
    b = [accuracy_of(run) for run in cells[3:]]
    delta, half = hand_interval(a, b)
    label = "effect" if abs(delta) > half else "noise"

    query = "&".join(f"run={run.run_id}" for run in [*cells, base])
    url = f"{live_server.url}{reverse('run-compare')}?{query}"
    started = time.monotonic()
    page = read_in_chromium(READ_PAGE, url, client.cookies[settings.SESSION_COOKIE_NAME].value)
    # Groups in the order first seen: A = lr 0.01 (3 seeds), B = lr 0.2 (3 seeds), C = the lone base run.
    said = {key: text.split("\t", 1)[1].split()[0] for key, text in page["pairs"].items()}  # "B − A<tab>effect Δ …"
    pair = page["pairs"]["synthetic/accuracy B-A"]
    assert said["synthetic/accuracy B-A"] == label and f"Δ = {delta:.4f} ± {half:.4f}" in pair, (pair, delta, half)
    assert said["synthetic/accuracy C-A"] == said["synthetic/accuracy C-B"] == "unknown"
    cell = page["cells"]["synthetic/accuracy"]
    assert f"{statistics.mean(a):.4f} ± {statistics.stdev(a):.4f}" in cell and "(3)" in cell and "(1)" in cell
    assert "Welch" in page["rule"]
    assert page["wide"] == [] and page["width"] <= 1280, (page["wide"], page["width"])
    print(f"\nA {a} B {b}: {label} Δ {delta:+.4f} ± {half:.4f}; the page read in {time.monotonic() - started:.1f} s")
