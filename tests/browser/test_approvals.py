"""In the browser, as two people: an operator requests a release, an approver approves it."""

import subprocess
import sys

from tests.browser.test_dashboard import sign_in
from tests.conftest import ARTIFACTS, REPO, subprocess_env
from tests.waiting import wait_until

SEED = """
from django.contrib.auth.models import User
from django.utils import timezone
from fleet.models import Instance
from projects.models import Membership, Project
ops = User.objects.create_user("ops1", password="ops1-pass-1234")
appr = User.objects.create_user("appr1", password="appr1-pass-1234")
project = Project.objects.create(name="Delivery", slug="delivery")
Membership.objects.create(project=project, user=ops, operator=True)
Membership.objects.create(project=project, user=appr, approver=True)
Instance.objects.create(name=f"delivery-box-{timezone.localdate():%Y%m%d}", project=project,
    profile_key="generic-ssh", host="203.0.113.9", user="ubuntu", state="running",
    shutdown_command="sudo -n shutdown -h now")
"""


def seed(stack) -> None:
    env = subprocess_env(REMOTEGPU_VAR_DIR=str(stack.var_dir), DATABASE_URL="")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", SEED], cwd=REPO, env=env, check=True, timeout=60)


def sign_out(page, stack) -> None:
    page.context.clear_cookies()
    page.goto(stack.url + "/")


def test_operator_requests_and_a_second_person_approves(page, stack):
    seed(stack)
    sign_in(page, stack, "ops1-pass-1234", username="ops1")
    page.goto(stack.url + "/instances/")
    page.click("a:has-text('delivery-box-')")

    # Three distinct consequences, each with its own custody check.
    shutdown, release = page.locator("#consequence-shutdown"), page.locator("#consequence-release")
    assert shutdown.locator("[data-check='No watcher expecting progress']").count() == 1
    assert release.locator("[data-check='What release destroys']").count() == 1
    assert shutdown.locator("[data-check='What release destroys']").count() == 0
    assert page.locator("#consequence-delete_evidence").is_visible()
    assert "L3" in release.inner_text() and "L2" in shutdown.inner_text()
    page.screenshot(path=str(ARTIFACTS / "teardown-panel.png"), full_page=True)

    release.locator("input[name=reason]").fill("experiment finished")
    release.locator("#button-release").click()
    page.wait_for_selector("#request-status:has-text('Pending approval')")
    assert page.locator("#approve").count() == 0
    assert "a second person must approve it" in page.inner_text("#own-request")
    request_url = page.url

    sign_out(page, stack)
    sign_in(page, stack, "appr1-pass-1234", username="appr1")
    page.goto(stack.url + "/approvals/")
    card = page.locator("section.request").first
    assert "ops1" in card.inner_text() and "experiment finished" in card.inner_text()
    assert card.locator("[data-check='No live run on the box']").count() == 1
    card.locator("a:has-text('Review and decide')").click()
    assert page.url == request_url
    page.fill("textarea[name=comment]", "nothing left on it")
    page.click("#approve")
    status = lambda: page.inner_text("#request-status")  # noqa: E731
    wait_until(lambda: "Awaiting console attestation" in status(), 60, 1, what=status, between=page.reload)
    assert "Choose “hand the machine back where it is managed” for that exact instance only." in page.inner_text(
        "#attest"
    )
    page.screenshot(path=str(ARTIFACTS / "approval.png"), full_page=True)


TWO_PROJECTS = """
from django.contrib.auth.models import User
from django.utils import timezone
from delivery.actions.requests import do_request_teardown
from fleet.models import Instance
from projects.models import Membership, Project
root = User.objects.create_superuser("root1", password="root1-pass-1234")
judge = User.objects.create_user("judge1", password="judge1-pass-1234")
for slug in ("ledger", "other"):
    project = Project.objects.create(name=slug.title(), slug=slug)
    asker = User.objects.create_user(f"ops-{slug}", password="x-pass-1234")
    Membership.objects.create(project=project, user=asker, operator=True)
    Membership.objects.create(project=project, user=judge)  # a member of both, with no role yet
    box = Instance.objects.create(name=f"{slug}-box-{timezone.localdate():%Y%m%d}", project=project,
        profile_key="generic-ssh", host="203.0.113.9", user="ubuntu", state="running",
        shutdown_command="sudo -n shutdown -h now")
    do_request_teardown(box.pk, "release", f"{slug} finished", actor=asker)
"""


def test_an_admin_grants_approver_on_one_project_and_it_holds_there_only(page, stack):
    """Roles per project in the browser: the Team page grants approver on Ledger only; the approval queue
    then offers Ledger's request to decide and shows Other's as someone else's decision."""
    env = subprocess_env(REMOTEGPU_VAR_DIR=str(stack.var_dir), DATABASE_URL="")
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", TWO_PROJECTS], cwd=REPO, env=env, check=True, timeout=60
    )
    sign_in(page, stack, "root1-pass-1234", username="root1")
    page.goto(stack.url + "/team/")
    row = page.locator("#user-judge1")
    row.locator("li[data-project='ledger'] input[value='approver']").check()
    row.locator("button:has-text('Save')").click()
    page.wait_for_selector("text=judge1 saved.")
    granted = page.locator("#user-judge1 li[data-project='ledger'] input[value='approver']")
    assert granted.is_checked()
    assert not page.locator("#user-judge1 li[data-project='other'] input[value='approver']").is_checked()
    assert "approver granted to judge1 on Ledger" in " ".join(page.inner_text("main").split())

    sign_out(page, stack)
    sign_in(page, stack, "judge1-pass-1234", username="judge1")
    page.goto(stack.url + "/approvals/")
    ledger = page.locator("section.request:has-text('ledger finished')")
    other = page.locator("section.request:has-text('other finished')")
    assert ledger.locator("a:has-text('Review and decide')").count() == 1
    assert "An approver of Other decides this." in other.inner_text()
    assert other.locator("a:has-text('Review and decide')").count() == 0
    other.locator("a:has-text('Open')").click()
    assert page.locator("#approve").count() == 0
    page.goto(stack.url + "/approvals/")
    page.locator("section.request:has-text('ledger finished') a:has-text('Review and decide')").click()
    assert page.locator("#approve").count() == 1
