"""In the browser: an operator stops a run mid-epoch from its page, sees it quarantined "stopped by" them
with its checkpoint kept, and retries it: the retry resumes from that checkpoint."""

import shutil
from pathlib import Path

from tests.browser.test_dashboard import sign_in
from tests.browser.test_runs import create_project_and_ssh_box, new_run
from tests.conftest import REPO
from tests.runs.conftest import Gate, set_config


def test_an_operator_stops_a_run_and_retries_it_from_its_checkpoint(page, stack, sshd, tmp_path):
    slug = "browserstop"
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
    source = Path(stack.var_dir) / "sources" / "stoppable"  # under the stack's allowed source root
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(REPO / "examples" / "tinyfit", source, ignore=shutil.ignore_patterns("ckpt", "output"))
    gate = Gate(tmp_path / "hold").hold(at=3)  # held at epoch 3 until stopped
    set_config(source, epochs=30, hold_file=gate.path)
    sign_in(page, stack, stack.password)
    create_project_and_ssh_box(page, stack, slug, sshd)
    new_run(page, stack, slug, source, "train.py --config config.yaml", "stop me")
    page.click("button:has-text('Start preflight')")
    page.wait_for_selector("#run-state:has-text('Running')", timeout=120_000)
    page.wait_for_selector("#log-tail:has-text('epoch 3/30')", timeout=60_000)

    stop = page.locator("#stop-run button")
    assert "danger" in (stop.get_attribute("class") or "")  # destructive, and looks it
    stop.click()
    page.wait_for_selector("ul.messages li:has-text('Stop sent')")
    page.wait_for_selector("#run-state:has-text('Closed: quarantined')", timeout=60_000)
    page.wait_for_selector("#failure h2:has-text('Stopped by a person')")
    assert "stopped by admin" in page.inner_text("#timeline")
    assert page.locator("#stop-run").count() == 0  # nothing left to stop
    # The message outlived every live swap of the page's parts: it goes when its reader dismisses it.
    sent = page.locator("ul.messages li", has_text="Stop sent")
    assert sent.count() == 1
    sent.locator("button.dismiss").click()
    assert sent.count() == 0

    gate.release()
    page.click("button:has-text('Retry identical config')")
    page.wait_for_selector("#run-state:has-text('Closed: exported')", timeout=120_000)
    assert "resumed from epoch" in page.inner_text("#timeline") + page.inner_text("pre.log-tail")
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
