"""Creating a run: bad input gets a clear form error and saves nothing; pages show identities and paths."""

import sys

import pytest
from django.urls import reverse

from core.states import IllegalTransition
from runs.actions.lifecycle import do_retry_run, do_start_preflight
from runs.models import Run, RunEvent, RunState
from tests import factories
from tests.personas import join
from tests.worker_env import NODE_ROOT

pytestmark = pytest.mark.django_db


@pytest.fixture
def instance(box_row):
    """Forms and answers: the box is a row these tests never reach (no sshd)."""
    return box_row


@pytest.fixture
def form(project, instance, source):
    return {
        "project": project.pk,
        "instance": instance.pk,
        "title": "baseline; rm -rf / $(x)",
        "source_kind": "local_dir",
        "source_path": str(source),
        "source_commit": "",
        "command_line": f"{sys.executable} train.py --config config.yaml",
        "config_path": "config.yaml",
        "data_paths_text": "/tmp\n$HOME",
        "manifest_path": "",
        "gpus_text": "0,1",
        "expected_minutes": "30",
        "checkpoint_mib": "100",
        "checkpoints_retained": "2",
        "scratch_mib": "0",
        "expected_files": "1000",
    }


def test_operator_creates_a_run_with_a_generated_safe_id(client, bob, form, project):
    client.force_login(bob)
    response = client.post(reverse("run-create"), form)
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.run_id.startswith(project.slug + "-") and set(run.run_id) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
    assert run.command == [sys.executable, "train.py", "--config", "config.yaml"]
    assert run.gpus == [0, 1] and run.data_paths == ["/tmp", "$HOME"]
    assert run.checkpoint_bytes == 100 * 1024**2
    assert RunEvent.objects.get(run=run).kind == "created"
    page = client.get(run.get_absolute_url()).content.decode()
    assert "baseline; rm -rf / $(x)" in page  # shown, escaped, never executed
    assert f"{NODE_ROOT.rsplit('/', 1)[1]}/{project.slug}/active/{run.run_id}" in page


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("config_path", "../secrets.yaml", "without &#x27;..&#x27;"),
        ("config_path", "/etc/passwd", "relative to the source directory"),
        ("data_paths_text", "/data/../../etc", "&#x27;..&#x27; is not allowed"),
        ("data_paths_text", "relative/data", "must be absolute or start with $HOME/"),
        ("manifest_path", "manifest.json", "must be absolute"),
        ("command_line", "python 'unterminated", "cannot be parsed"),
        ("command_line", "   ", "This field is required"),
        ("gpus_text", "0,0", "distinct numbers"),
        ("gpus_text", "gpu0", "comma-separated indices"),
        ("source_path", "/etc", "outside the allowed source roots"),
        ("checkpoint_mib", "-5", "greater than or equal to 0"),
        ("capsule", "weights-too", "Select a valid choice"),
        ("trainer_files_text", "checkpoints: /abs/ckpt.pt\nmetrics: log.csv", "relative to the source directory"),
        ("trainer_files_text", "weights: w.pt", "declare one of metrics (a file) or log_pattern"),
    ],
)
def test_bad_input_is_a_form_error_and_saves_nothing(client, bob, form, field, value, error):
    client.force_login(bob)
    response = client.post(reverse("run-create"), {**form, field: value})
    assert response.status_code == 200
    assert error in response.content.decode()
    assert not Run.objects.exists()


def test_a_hardware_capsule_is_chosen_in_the_form_and_the_api_and_seals_apart(client, bob, form, project, source):
    client.force_login(bob)
    client.post(reverse("run-create"), {**form, "capsule": "hardware"})
    run = Run.objects.get()
    assert run.capsule == "hardware"
    page = client.get(run.get_absolute_url()).content.decode()
    assert f"{project.slug}/export/hardware/{run.run_id}" in page and 'id="capsule"' in page
    body = {
        "project": project.slug,
        "instance": run.instance.name,
        "source_kind": "local_dir",
        "source_path": str(source),
        "command": [sys.executable, "capture.py"],
        "config_path": "config.yaml",
    }
    answer = client.post("/api/runs/", {**body, "capsule": "hardware"}, content_type="application/json")
    assert answer.status_code == 201 and answer.json()["capsule"] == "hardware"
    answer = client.post("/api/runs/", {**body, "capsule": "firmware"}, content_type="application/json")
    assert answer.status_code == 400 and "capsule" in answer.json()["detail"]
    answer = client.post("/api/runs/", body, content_type="application/json")
    assert answer.status_code == 201 and Run.objects.get(run_id=answer.json()["run_id"]).capsule == "software"


def test_node_source_path_with_dotdot_is_refused(client, bob, form):
    client.force_login(bob)
    response = client.post(reverse("run-create"), {**form, "source_kind": "node_path", "source_path": "/srv/../etc"})
    assert "not allowed in node paths" in response.content.decode()


def test_instance_of_another_project_is_refused(client, bob, form, instance):

    other = factories.project(name="Other", slug="other")
    join(other, bob)
    client.force_login(bob)
    response = client.post(reverse("run-create"), {**form, "project": other.pk})
    assert "belongs to another project" in response.content.decode()


def test_unconfirmed_host_key_is_refused(client, bob, form, instance):
    instance.host_key_base64 = ""
    instance.save()
    client.force_login(bob)
    response = client.post(reverse("run-create"), {**form})
    assert "Confirm this instance" in response.content.decode()


def test_git_source_binds_the_commit(client, bob, form, source):
    import subprocess

    subprocess.run(["git", "init", "-q", str(source)], check=True)
    subprocess.run(["git", "-C", str(source), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(source), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True
    )
    head = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    client.force_login(bob)
    client.post(reverse("run-create"), {**form, "source_kind": "git", "source_commit": "HEAD"})
    assert Run.objects.get().source_commit == head
    response = client.post(reverse("run-create"), {**form, "source_kind": "git", "source_commit": "nope"})
    assert "is not a commit" in response.content.decode()


def test_a_member_without_the_role_cannot_create_or_start(client, carol, form, make_run):
    client.force_login(carol)
    assert client.post(reverse("run-create"), form).status_code == 403
    run = make_run()
    assert client.post(reverse("run-preflight", args=[run.run_id])).status_code == 403
    run.refresh_from_db()
    assert run.state == RunState.DRAFT


def test_illegal_transitions_raise(bob, make_run):
    run = make_run()
    with pytest.raises(IllegalTransition):
        do_retry_run(run.pk, actor=bob)
    do_start_preflight(run.pk, actor=bob)
    with pytest.raises(IllegalTransition, match="cannot go from Preflight to Preflight"):
        do_start_preflight(run.pk, actor=bob)


def test_new_run_like_this_prefills_and_ships_its_own_overrides(client, bob, form, project, source):
    """Change lr and run again, without copying the source directory."""
    from tests.runs.conftest import set_config

    set_config(source, lr=0.1, epochs=3)
    client.force_login(bob)
    client.post(reverse("run-create"), form)
    base = Run.objects.get()
    page = client.get(base.get_absolute_url()).content.decode()
    assert f'href="/runs/new/?like={base.run_id}"' in page
    prefilled = client.get(f"/runs/new/?like={base.run_id}").content.decode()
    assert f"like {base.run_id}" in prefilled and "--config config.yaml" in prefilled and "0,1" in prefilled
    bad = client.post(reverse("run-create"), {**form, "config_overrides_text": "learning_rate=0.01"})
    assert bad.status_code == 200 and "unknown config key(s) learning_rate" in bad.content.decode()
    assert Run.objects.count() == 1  # nothing saved
    client.post(reverse("run-create"), {**form, "config_overrides_text": "lr=0.01\nepochs=5"})
    like = Run.objects.exclude(pk=base.pk).get()
    assert like.config_overrides == {"lr": 0.01, "epochs": 5} and like.run_id != base.run_id
    again = client.get(f"/runs/new/?like={like.run_id}").content.decode()
    assert "lr=0.01\nepochs=5" in again  # the overrides carry over, editable
    assert (
        "Config overrides: <code>lr=0.01</code> <code>epochs=5</code>"
        in client.get(like.get_absolute_url()).content.decode()
    )


def test_a_run_that_has_not_run_is_edited_in_place_and_audited(client, bob, form, make_run, source):
    """A draft (or a failed preflight/smoke) is edited; its stale identities go; a bad
    edit is a form error that changes nothing; a run that ran, or someone without the role, cannot."""
    from tests.runs.conftest import set_config

    set_config(source, lr=0.1, epochs=3)
    client.force_login(bob)
    client.post(reverse("run-create"), form)
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(state=RunState.FAILED_SMOKE, config_sha256="a" * 64, smoke_exit_code=1)
    assert 'id="edit-run"' in client.get(run.get_absolute_url()).content.decode()
    page = client.get(reverse("run-edit", args=[run.run_id])).content.decode()
    assert "--config config.yaml" in page and "baseline; rm -rf / $(x)" in page  # its own values

    bad = client.post(reverse("run-edit", args=[run.run_id]), {**form, "config_overrides_text": "nope=1"})
    assert bad.status_code == 200 and "unknown config key(s) nope" in bad.content.decode()
    assert Run.objects.get().config_overrides == {} and Run.objects.get().config_sha256 == "a" * 64

    edited = {**form, "project": "999999", "config_overrides_text": "lr=0.01", "gpus_text": "0", "title": "lr 0.01"}
    assert client.post(reverse("run-edit", args=[run.run_id]), edited).status_code == 302
    run.refresh_from_db()
    assert (run.config_overrides, run.gpus, run.title) == ({"lr": 0.01}, [0], "lr 0.01")
    assert run.project_id == form["project"]  # the project is the run's identity: a posted one is ignored
    assert run.config_sha256 == "" and run.smoke_exit_code is None and run.state == RunState.FAILED_SMOKE
    event = run.events.get(kind="edited")
    assert event.actor == bob and set(event.data["fields"]) == {"config_overrides", "gpus", "title"}

    Run.objects.filter(pk=run.pk).update(state=RunState.EXPORTED, attempt=1)
    refused = client.post(reverse("run-edit", args=[run.run_id]), {**edited, "title": "rewritten"}, follow=True)
    assert "keeps what it ran" in refused.content.decode() and Run.objects.get().title == "lr 0.01"
    assert 'id="edit-run"' not in refused.content.decode()


def test_only_an_operator_member_edits_a_run(client, carol, charlie, form, make_run):
    run = make_run()
    client.force_login(carol)  # a member without the operator role
    assert client.post(reverse("run-edit", args=[run.run_id]), form).status_code == 403
    client.force_login(charlie)
    assert client.get(reverse("run-edit", args=[run.run_id])).status_code in (403, 404)
    assert not run.events.filter(kind="edited").exists()
