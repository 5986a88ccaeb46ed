"""A run's GPU use on its page, in headless Chromium: what the watcher kept of nvidia-smi's answers is
drawn as one chart per GPU and quantity over minutes (the training curves' own chart code), and a run
whose GPUs sit idle says so above them."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from runs.models import GpuSample, RunState
from tests import factories
from tests.browser.conftest import read_in_chromium
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.e2e]  # it starts its own Chromium

MEASURE = """
    page.wait_for_selector("#gpu-use figure.curve")
    charts = page.evaluate("[...document.querySelectorAll('#gpu-use figure.curve')].map(f => f.dataset.metric)")
    axis = page.locator("#gpu-use").inner_text()
    page.locator("#gpu-use-card").screenshot(path=SHOT)
    print(json.dumps({"charts": charts, "idle": page.locator("#gpu-idle").inner_text(), "text": axis}))
"""


def test_the_run_page_plots_each_gpu_and_says_when_they_sit_idle(client, live_server, bob):
    box = factories.box(factories.project(bob), host="203.0.113.9", user="root", state="running")
    start = timezone.now() - timedelta(minutes=40)
    run = factories.run(box, state=RunState.RUNNING, gpus=[0, 1], gpu_sampled_at=start, gpu_idle_since=start)
    for minute in range(40):
        busy = 90 if minute < 10 else 2  # a data loader stuck after ten minutes
        gpus = [{"index": i, "utilization_pct": busy, "memory_used_mib": 20480 + i} for i in (0, 1)]
        GpuSample.objects.create(run=run, at=start + timedelta(minutes=minute), gpus=gpus)
    client.force_login(bob)
    ARTIFACTS.mkdir(exist_ok=True)
    script = MEASURE.replace("SHOT", repr(str(ARTIFACTS / "gpu-use.png")))
    seen = read_in_chromium(
        script, f"{live_server.url}{run.get_absolute_url()}", client.cookies[settings.SESSION_COOKIE_NAME].value
    )
    assert sorted(seen["charts"]) == [
        "GPU 0 memory GiB", "GPU 0 utilisation %", "GPU 1 memory GiB", "GPU 1 utilisation %"
    ], seen  # fmt: skip
    assert "minutes" in seen["text"], seen
    assert seen["idle"].startswith("Every GPU of the run under 10 % since"), seen
