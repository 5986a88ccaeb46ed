"""In the browser: register a box (first-contact acknowledgement), run the audit, read the numbers.

The local workstation runs its commands as the worker's own user only in the one-person mode (the
admin is the only account): this module has a stack of its own, fresh, so it starts in that mode."""

import pytest
from django.utils import timezone

from tests.browser.conftest import started_stack
from tests.browser.test_dashboard import sign_in
from tests.browser.test_runs import create_person
from tests.built_once import migrated_sqlite
from tests.conftest import ARTIFACTS


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = started_stack(tmp_path_factory.mktemp("lone-stack-var"), migrated_sqlite(tmp_path_factory))
    yield running
    running.kill()


def test_register_local_instance_and_audit_it(page, stack):
    sign_in(page, stack, stack.password)
    page.goto(stack.url + "/projects/new/")
    page.fill("#id_name", "Speech")
    page.fill("#id_slug", "speech")
    page.click("button:has-text('Create project')")

    page.goto(stack.url + "/instances/new/")
    page.select_option("#id_project", label="Speech")
    page.fill("#id_name", "my box")
    page.select_option("#id_profile_key", "local")
    page.click("button:has-text('Register')")
    assert "Suggested: speech-my-box-" in page.inner_text(".field.invalid")
    assert "First Local workstation box in this project" in page.inner_text(".first-contact")

    page.fill("#id_name", f"speech-desk-{timezone.localdate():%Y%m%d}")
    page.check("#id_acknowledge")
    page.click("button:has-text('Register')")
    page.wait_for_selector("h1:has-text('speech-desk')")

    # No reload from here on: the page follows the probe and the audit over its socket.
    # The "queued" notice stays until its reader dismisses it (messages no longer vanish).
    page.wait_for_selector("#connection:has-text('live')")
    page.click("button:has-text('Test connection')")
    page.wait_for_selector("ul.messages li:has-text('queued')")
    page.wait_for_selector("#probes td:has-text('Connection test') ~ td .keeps", timeout=60_000)
    queued = page.locator("ul.messages li", has_text="queued")
    assert queued.count() == 1  # outlived the live swap that brought the probe's result
    queued.locator("button.dismiss").click()
    assert queued.count() == 0
    page.click("button:has-text('Run environment audit')")
    page.wait_for_selector(".disk-bytes", timeout=90_000)
    assert "free of" in page.inner_text(".disk-bytes")
    assert "free of" in page.inner_text(".disk-inodes")
    page.screenshot(path=str(ARTIFACTS / "instance.png"), full_page=True)

    # A second account ends the one-person mode: the control host runs nothing more as the worker.
    create_person(page, stack, "olive")
    page.goto(stack.url + "/instances/")
    page.click("a:has-text('speech-desk')")
    page.click("button:has-text('Test connection')")
    page.wait_for_selector("#probes td:has-text('REMOTEGPU_LOCAL_NODE_USER')", timeout=60_000)
