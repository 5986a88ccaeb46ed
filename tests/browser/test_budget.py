"""In the browser: an operator sets the project's cost envelope after creation, from the project page;
a forecast above it warns there and on the dashboard card."""

import shutil
from pathlib import Path

from tests.browser.test_dashboard import sign_in
from tests.browser.test_runs import create_project_and_ssh_box


def test_a_budget_set_after_creation_warns_when_the_forecast_exceeds_it(page, stack, sshd):
    slug = "browserbudget"
    sign_in(page, stack, stack.password)
    create_project_and_ssh_box(page, stack, slug, sshd)
    page.click("#edit-instance")
    page.fill("#id_rate_running", "400")  # a box billing $400/h: any period's forecast is far above $50
    page.click("main button:has-text('Save')")
    page.wait_for_selector("ul.messages li:has-text('Saved')")
    page.select_option("form.state-form select[name=state]", "running")  # as its console shows it
    page.fill("form.state-form input[name=reason]", "seen running in the console")
    # A live update arriving once the focus has left the fields (on its way to the button) swapped the
    # part holding the form, and the click sent the form's default state (stress pass, seed 13274).
    page.focus("form.state-form button:has-text('Record state')")
    page.evaluate("window.swapLiveFragments()")
    assert page.input_value("form.state-form select[name=state]") == "running"
    page.click("form.state-form button:has-text('Record state')")
    # The message, not the word: the state menu's own "running" option matched before the POST landed,
    # and the next goto could cancel it (stress pass 3, seed 2938).
    page.wait_for_selector("ul.messages li:has-text('State recorded.')")
    assert page.locator("#instance-state.state-running").count() == 1

    page.goto(f"{stack.url}/projects/{slug}/")
    assert page.locator("#forecast-warning").count() == 0  # no budget, nothing to exceed
    page.fill("#envelope-form #id_budget", "50")
    page.select_option("#envelope-form #id_budget_period", "month")
    page.click("#envelope-form button:has-text('Save envelope')")
    page.wait_for_selector("ul.messages li:has-text('Cost envelope saved')")
    page.wait_for_selector("#forecast-warning:has-text('above the $50.00 budget')")
    assert "changed budget: none → 50" in page.inner_text("#envelope-history")

    page.goto(stack.url + "/")
    row = page.locator("#cost-envelopes tr", has_text=slug.title())
    assert row.locator(".forecast-over").count() == 1

    # A negative budget is a form error on the page; the envelope stays as it was.
    page.goto(f"{stack.url}/projects/{slug}/")
    page.fill("#envelope-form #id_budget", "-5")
    page.click("#envelope-form button:has-text('Save envelope')")
    page.wait_for_selector("ul.messages li.error:has-text('The envelope is unchanged')")
    assert "$50.00" in page.inner_text("#envelope")
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
