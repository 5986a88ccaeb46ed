"""In the browser: a box rented by constraint. The provider stubs start a real sshd (fresh port, fresh host
key) on create. Lambda answers "no capacity", vast.ai creates; a second person approves the spend; the box
appears named by the rule; its host key waits for a person; tinyfit runs on it and its custody verifies.
The worker is killed while the provider's answer to the create is held: the box is created once."""

import getpass
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.browser.conftest import started_stack
from tests.browser.test_dashboard import choose_own_password, sign_in
from tests.browser.test_runs import create_person, new_run, run_to_export
from tests.built_once import migrated_sqlite
from tests.conftest import ARTIFACTS, REPO
from tests.provider_stub import KEY_ENV
from tests.provider_stubs import lambdalabs
from tests.provider_stubs.vastai import offer as vast_offer
from tests.sshd import BoxMaker
from tests.waiting import wait_until

OFFERS = [
    vast_offer(601, "RTX_4090", 24564, 0.52),
    vast_offer(602, "RTX_4090", 24564, 0.41),
]
TYPES = {"gpu_1x_rtx4090": lambdalabs.instance_type("gpu_1x_rtx4090", "RTX 4090 (24 GB)", 39, ["us-west-1"])}


@pytest.fixture(scope="module")
def renting(tmp_path_factory, provider_stub):
    """A stack whose workers speak to the provider stubs, which start a loopback sshd for each box made."""
    directory = tmp_path_factory.mktemp("renting")
    maker = BoxMaker(directory)
    provider_stub.reset()
    provider_stub.on_create, provider_stub.on_attach = maker, maker.authorize
    provider_stub.offers.update(vastai=OFFERS)
    provider_stub.offers["lambda"] = TYPES
    provider_stub.no_capacity.add("lambda")
    stack = started_stack(
        directory / "var",
        migrated_sqlite(tmp_path_factory),
        **provider_stub.env,
        RENT_POLL_SECONDS="1",
        RENT_CREATE_SECONDS="4",
        RECONCILE_INTERVAL="2",
    )
    yield stack, maker.client_key, maker.started
    stack.kill()
    maker.stop()
    provider_stub.reset()


def credential(page, stack, name, kind, reference, project_name):
    page.goto(stack.url + "/credentials/new/")
    page.fill("#id_name", name)
    page.select_option("#id_kind", kind)
    page.fill("#id_reference", reference)
    page.locator("label", has_text=project_name).locator("input[name=projects]").check()
    page.click("main button:has-text('Save')")
    page.wait_for_selector(f"text=Credential {name} saved")


def kill_workers(stack) -> list[int]:
    """SIGKILL every Celery worker process of this stack (runstack starts them again, as after a crash)."""
    found = subprocess.run(["pgrep", "-g", str(stack.process.pid), "-f", "celery"], capture_output=True, text=True)
    pids = [int(pid) for pid in found.stdout.split()]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids


def test_a_box_is_rented_approved_registered_and_runs_tinyfit(page, renting, provider_stub):
    stack, client_key, servers = renting
    slug = "rentwalk"
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
    sign_in(page, stack, stack.password)
    page.goto(stack.url + "/projects/new/")
    page.fill("#id_name", slug.title())
    page.fill("#id_slug", slug)
    page.click("button:has-text('Create project')")
    credential(page, stack, f"{slug}-ssh", "ssh-key", str(client_key), slug.title())
    # Lambda's launch names an account key: the rent's own is held there under its credential's name.
    public = " ".join(Path(f"{client_key}.pub").read_text().split()[:2])
    provider_stub.account_keys["lambda"] = [{"id": "k1", "name": f"{slug}-ssh", "public_key": public}]
    credential(page, stack, f"{slug}-vast", "provider-key", f"env:{KEY_ENV}", slug.title())
    operator_password = create_person(page, stack, "rory", "operator", slug)
    approver_password = create_person(page, stack, "ada", "approver", slug)

    operator = page.context.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    sign_in(operator, stack, operator_password, username="rory")
    choose_own_password(operator, stack, operator_password)
    operator.goto(stack.url + "/rentals/")
    operator.click(f"#rent-in-{slug}")
    operator.fill("#id_purpose", "train")
    operator.fill("#id_gpu_models", "RTX 4090")
    operator.fill("#id_gpu_memory_gb", "20")
    operator.fill("#id_max_rate", "0.60")
    operator.fill("#id_candidates", "lambda, vastai")
    operator.select_option("#id_ssh_credential", label=f"{slug}-ssh")
    operator.fill("#id_ssh_user", getpass.getuser())
    operator.fill("#id_expected_minutes", "30")
    operator.select_option("#id_key_lambda", label=f"{slug}-vast")
    operator.select_option("#id_key_vastai", label=f"{slug}-vast")
    operator.check("#id_acknowledge")
    operator.click("#rent-submit")
    operator.wait_for_selector("#rental, .error")
    assert operator.locator("#rental").count() == 1, operator.inner_text("main")
    operator.wait_for_selector("text=another approver decides")
    assert "at most $0.30" in operator.inner_text("#rental-cost")
    name = operator.inner_text("h1").split("·")[1].strip()
    assert name.startswith(f"{slug}-train-r") and operator.locator("#approve-rental").count() == 0

    # The create's answer is held at the provider while the worker that sent it is killed.
    provider_stub.hold["602"] = threading.Event()
    approver = page.context.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    sign_in(approver, stack, approver_password, username="ada")
    choose_own_password(approver, stack, approver_password)
    approver.goto(stack.url + "/approvals/")
    approver.fill("#renting ~ section.rent input[name=comment]", "fits the budget")
    approver.click("button:has-text('Approve rent')")
    wait_until(lambda: provider_stub.creates(), timeout=60, what="the create to reach vast.ai")
    assert kill_workers(stack)
    provider_stub.hold["602"].set()

    # No reload: the rent page follows the worker (restarted, re-driven) until the host key waits.
    try:
        operator.wait_for_selector("#rental-fingerprint", timeout=90_000)
    except Exception:
        operator.reload()
        raise AssertionError(operator.inner_text("main") + "\n".join(stack.lines[-60:])) from None
    assert len(provider_stub.creates()) == 1, provider_stub.creates()
    attempts = operator.inner_text("#rental-attempts")
    assert "No capacity" in attempts and "found by its name" in attempts
    assert operator.inner_text("#rental-instance") == name
    operator.screenshot(path=str(ARTIFACTS / "rent.png"), full_page=True)

    # Its data root on this loopback box, then the key the person compared is pinned.
    rent_url = operator.url
    operator.click("#rental-instance")
    operator.click("#edit-instance")
    operator.fill("#id_data_root_override", str(Path.home() / "proj"))
    operator.click("main button:has-text('Save')")
    operator.wait_for_selector("ul.messages li:has-text('Saved: data_root_override')")
    operator.goto(rent_url)
    operator.click("#confirm-rental")
    operator.wait_for_selector("#rental-state:has-text('Ready')")

    new_run(operator, stack, slug, REPO / "examples" / "tinyfit", "train.py --config config.yaml", "on a rented box")
    operator.wait_for_selector("#run-state:has-text('Draft')")
    run_to_export(operator, timeout=180_000)
    operator.click("button:has-text('Verify custody')")
    operator.wait_for_selector("#custody h2 .keeps", timeout=120_000)
    shutil.rmtree(Path.home() / "proj" / slug, ignore_errors=True)
