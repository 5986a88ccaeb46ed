"""In the browser: a person's own password. A one-time password from the Team page opens
nothing but its replacement; a forgotten password is reset by a mailed link (the stack's console
e-mail backend prints the mail, as a team's SMTP backend would send it)."""

import re
import time

from tests.browser.test_dashboard import choose_own_password, sign_in
from tests.browser.test_runs import create_person


def mailed_link(stack, username: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = "\n".join(stack.lines)
        if f"password of {username}" in text:
            links = re.findall(
                r"https?://\S+/account/password/reset/\S+/\S+/", text.split(f"password of {username}")[-1]
            )
            if links:
                return links[0]
        time.sleep(0.2)
    raise AssertionError("no reset mail for " + username)


def test_a_one_time_password_is_changed_at_first_sign_in(page, stack):
    sign_in(page, stack, stack.password)
    one_time = create_person(page, stack, "pat")

    pat = page.context.browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    sign_in(pat, stack, one_time, username="pat")
    assert "/account/password/" in pat.url
    pat.goto(stack.url + "/runs/")  # every other page leads back to the change
    assert "/account/password/" in pat.url and pat.locator("#password-duty").count() == 1
    api = pat.request.get(stack.url + "/api/runs/")
    assert api.status == 403 and api.json()["error"] == "password_change_required"

    # A wrong current password or a weak new one is a form error; the duty stays.
    pat.fill("#id_old_password", "not-it")
    pat.fill("#id_new_password1", "12345678")
    pat.fill("#id_new_password2", "12345678")
    pat.click("#password-change-form button[type=submit]")
    pat.wait_for_selector(".field.invalid")
    assert pat.locator("#password-duty").count() == 1

    own = choose_own_password(pat, stack, one_time)
    pat.goto(stack.url + "/runs/")
    assert "/runs/" in pat.url and pat.locator("#password-duty").count() == 0

    # Signed out, the one-time password no longer opens the account; their own does, with no duty.
    pat.click("form.logout button")
    sign_in(pat, stack, one_time, username="pat")
    pat.wait_for_selector(".error")
    sign_in(pat, stack, own, username="pat")
    pat.wait_for_selector("#nav-password")
    assert "/account/password/" not in pat.url

    # From the navigation, a signed-in person changes it again.
    pat.click("#nav-password")
    assert pat.locator("#password-duty").count() == 0
    pat.fill("#id_old_password", own)
    pat.fill("#id_new_password1", own + "-again")
    pat.fill("#id_new_password2", own + "-again")
    pat.click("#password-change-form button[type=submit]")
    pat.wait_for_selector("ul.messages li:has-text('Your password is changed')")
    pat.context.close()


def test_a_forgotten_password_is_reset_by_a_mailed_link(page, stack):
    sign_in(page, stack, stack.password)
    one_time = create_person(page, stack, "quinn")
    page.click("form.logout button")

    page.goto(stack.url + "/login/")
    page.click("#forgot-password")
    page.fill("#id_email", "quinn@example.com")
    page.click("main button[type=submit]")
    page.wait_for_selector("#reset-sent")
    link = mailed_link(stack, "quinn")

    page.goto(link)
    new = "quinn-chose-this-9"
    page.fill("#id_new_password1", new)
    page.fill("#id_new_password2", new)
    page.click("main button[type=submit]")
    page.wait_for_selector("ul.messages li:has-text('Your password is set')")
    page.goto(link)  # a link works once
    page.wait_for_selector("#reset-link-invalid")

    # Reset is the person choosing: no password duty afterwards, and the one-time password is dead.
    sign_in(page, stack, one_time, username="quinn")
    page.wait_for_selector(".error")
    sign_in(page, stack, new, username="quinn")
    page.wait_for_selector("#nav-password")
    assert "/account/password/" not in page.url
