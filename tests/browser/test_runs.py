"""In the browser: a run on the local workstation, from the form to a sealed export, watched on its page."""

import shutil
import sys
import time
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


def test_run_from_form_to_sealed_export(page, stack):
    slug = "browserrun"
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
    sign_in(page, stack, stack.password)
    create_project_and_local_instance(page, stack, slug)

    page.goto(stack.url + "/runs/new/")
    page.select_option("#id_project", label=slug.title())
    page.select_option("#id_instance", index=1)
    page.fill("#id_title", "tinyfit baseline")
    page.select_option("#id_source_kind", "local_dir")
    page.fill("#id_source_path", str(REPO / "examples" / "tinyfit"))
    page.fill("#id_command_line", f"{sys.executable} train.py --config config.yaml")
    page.fill("#id_config_path", "config.yaml")
    page.click("button:has-text('Create run')")
    page.wait_for_selector("#run-state:has-text('Draft')")

    page.click("button:has-text('Start preflight')")
    deadline = time.monotonic() + 120
    while "Closed: exported" not in page.inner_text("#run-state") and time.monotonic() < deadline:
        time.sleep(2)
        page.click("button:has-text('Check the node now')")
    assert page.inner_text("#run-state") == "Closed: exported", page.inner_text("#timeline")
    timeline = page.inner_text("#timeline")
    for step in ["Preflight passed", "CPU smoke passed", "launched detached", "Export sealed"]:
        assert step in timeline
    assert len(page.inner_text("code.identity >> nth=1")) == 64  # config SHA-256 bound
    assert "done: best epoch" in page.inner_text("pre.log-tail")
    page.screenshot(path=str(ARTIFACTS / "run.png"), full_page=True)
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
