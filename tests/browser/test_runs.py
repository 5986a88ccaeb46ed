"""In the browser: a run on the local workstation, from the form to a sealed export, watched on its page."""

import shutil
import sys
from pathlib import Path

from django.utils import timezone

from tests.browser.test_dashboard import sign_in
from tests.conftest import ARTIFACTS, REPO


def create_project_and_local_instance(page, stack, slug):
    page.goto(stack.url + "/projects/new/")
    page.fill("#id_name", slug.title())
    page.fill("#id_slug", slug)
    page.click("button:has-text('Create project')")
    page.goto(stack.url + "/instances/new/")
    page.select_option("#id_project", label=slug.title())
    page.fill("#id_name", f"{slug}-desk-{timezone.localdate():%Y%m%d}")
    page.select_option("#id_profile_key", "local")
    page.check("#id_acknowledge")
    page.click("button:has-text('Register')")
    page.wait_for_selector("h1:has-text('desk')")


def new_run(page, stack, slug, source, command: str, title: str = "") -> None:
    """Fill and submit the new-run form: the project's local box, a local directory, config.yaml."""
    page.goto(stack.url + "/runs/new/")
    page.select_option("#id_project", label=slug.title())
    page.select_option("#id_instance", index=1)
    if title:
        page.fill("#id_title", title)
    page.select_option("#id_source_kind", "local_dir")
    page.fill("#id_source_path", str(source))
    page.fill("#id_command_line", f"{sys.executable} {command}")
    page.fill("#id_config_path", "config.yaml")
    page.click("button:has-text('Create run')")


def test_run_from_form_to_sealed_export(page, stack):
    slug = "browserrun"
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
    sign_in(page, stack, stack.password)
    create_project_and_local_instance(page, stack, slug)

    new_run(page, stack, slug, REPO / "examples" / "tinyfit", "train.py --config config.yaml", "tinyfit baseline")
    page.wait_for_selector("#run-state:has-text('Draft')")

    # A second browser tab on the project page: its live-runs table follows without a reload.
    project_page = page.context.new_page()
    project_page.goto(f"{stack.url}/projects/{slug}/")
    project_page.wait_for_selector("#connection:has-text('live')")
    page.click("button:has-text('Start preflight')")
    page.wait_for_selector("#connection:has-text('live')")
    # No reload from here on: the badge, timeline, log and curves follow the WebSocket.
    page.wait_for_selector("#run-state:has-text('Closed: exported')", timeout=120_000)
    assert page.locator("#curves svg polyline").count() >= 3  # train_loss, val_loss, val_accuracy
    project_page.wait_for_selector("#live-runs td.run-state:has-text('Closed: exported')", timeout=30_000)
    timeline = page.inner_text("#timeline")
    for step in ["Preflight passed", "CPU smoke passed", "launched detached", "Export sealed"]:
        assert step in timeline
    assert len(page.inner_text("code.identity >> nth=1")) == 64  # config SHA-256 bound
    assert "done: best epoch" in page.inner_text("pre.log-tail")
    # The buttons follow the state without a reload (issue 18 §2): the next step is offered, the
    # finished ones are gone, and a closed run shows no health or heartbeat.
    page.wait_for_selector("button:has-text('Verify custody')", timeout=30_000)
    assert page.locator("button:has-text('Start preflight')").count() == 0
    assert page.inner_text("#run-health") == "" and "heartbeat" not in page.inner_text("#heartbeat")
    page.click("button:has-text('Verify custody')")
    page.wait_for_selector("#custody h2 .keeps", timeout=120_000)  # verified, swapped in live
    page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)


def test_log_line_with_markup_is_shown_as_text(page, stack):
    slug = "escaping"
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
    source = Path(stack.var_dir) / "sources" / "markup"
    source.mkdir(parents=True, exist_ok=True)
    (source / "config.yaml").write_text("seed: 1\n")
    (source / "markup.py").write_text(
        "import os, time\nprint('<script>window.pwned = 1</script> <b>bold</b>', flush=True)\n"
        "time.sleep(0 if os.environ.get('REMOTEGPU_SMOKE') == '1' else 8)\n"
    )
    dialogs = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    sign_in(page, stack, stack.password)
    create_project_and_local_instance(page, stack, slug)
    new_run(page, stack, slug, source, "markup.py")
    assert page.locator(".error").count() == 0, page.locator(".error").all_inner_texts()
    page.click("button:has-text('Start preflight')")
    page.wait_for_selector("#log-tail:has-text('window.pwned')", timeout=60_000)
    assert "<script>window.pwned = 1</script> <b>bold</b>" in page.inner_text("#log-tail")
    assert page.locator("#log-tail script, #log-tail b").count() == 0
    assert page.evaluate("window.pwned") is None and dialogs == []
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
