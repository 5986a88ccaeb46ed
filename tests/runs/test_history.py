"""Cross-project history, membership and comparison on a seeded set spanning three projects."""

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from console import history
from runs import rollups
from runs.models import Run
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(alice, bob):
    """Three projects (bob belongs to two), six runs with known states, commits, configs and custody."""
    projects = {}
    for slug in ("vision", "speech", "secret"):
        project = factories.project(alice, *([bob] if slug != "secret" else []), name=slug.title(), slug=slug)
        profile = "runpod" if slug == "speech" else "generic-ssh"
        box = factories.box(project, profile, name=f"{slug}-box-20261129")
        projects[slug] = (project, box)
    rows = [
        ("vision", "vision-a", "exported", "abc123", "lr sweep", "verified"),
        ("vision", "vision-b", "exported", "abc999", "lr sweep", "failed"),
        ("vision", "vision-c", "running", "def456", "baseline", None),
        ("speech", "speech-a", "exported", "abc123", "whisper tune", "verified"),
        ("speech", "speech-b", "failed_smoke", "fff000", "whisper tune", None),
        ("secret", "secret-a", "exported", "abc123", "hidden", "verified"),
    ]
    now = timezone.now()
    for age, (slug, run_id, state, commit, title, custody) in enumerate(rows):
        project, box = projects[slug]
        run = factories.run(
            box,
            run_id=run_id,
            state=state,
            resolved_commit=commit,
            title=title,
            source_kind="node_path",
            source_path="/srv/x",
            command=["python", f"train_{slug}.py"],
            config_path="c.yaml",
            config_sha256=uuid.uuid4().hex,
            gpus=[0],
            gpu_seconds=3600.0 * (age + 1),
        )
        Run.objects.filter(pk=run.pk).update(created=now - timedelta(days=age))
        if custody:
            factories.pulling_record(run, status=custody)
    rollups.rebuild()  # the rows were written around the actions, as a deploy's data before the totals
    return projects


def ids(user, **params):
    return [run.run_id for run in history.page_of(user, params).runs]


def test_filters_and_search_return_exactly_the_expected_runs(seeded, bob, alice):
    assert ids(bob) == ["vision-a", "vision-b", "vision-c", "speech-a", "speech-b"]  # never secret-a
    assert "secret-a" in ids(alice)
    assert ids(bob, project="speech") == ["speech-a", "speech-b"]
    assert ids(bob, platform="runpod") == ["speech-a", "speech-b"]
    assert ids(bob, instance="vision-box-20261129", state="exported") == ["vision-a", "vision-b"]
    assert ids(bob, custody="verified") == ["vision-a", "speech-a"]
    assert ids(bob, custody="failed") == ["vision-b"]
    assert ids(bob, custody="none") == ["vision-c", "speech-b"]
    assert ids(bob, q="abc123") == ["vision-a", "speech-a"]  # commit prefix
    assert ids(bob, q="train_speech") == ["speech-a", "speech-b"]  # command
    assert ids(bob, q="WHISPER") == ["speech-a", "speech-b"]  # name, case-insensitive
    since = (timezone.localdate() - timedelta(days=1)).isoformat()
    assert ids(bob, since=since) == ["vision-a", "vision-b"]
    assert ids(bob, sort="oldest")[0] == "speech-b"
    assert ids(bob, state="no-such-state") == ids(bob)  # an unknown filter value is ignored, not a 500


def test_each_row_of_a_page_says_its_custody_and_a_verified_retry_outranks_a_failure(seeded, bob):
    factories.pulling_record(Run.objects.get(run_id="vision-b"), status="verified")  # re-verified
    shown = {run.run_id: (run.custody_verified, run.custody_failed) for run in history.page_of(bob, {}).runs}
    assert shown == {
        "vision-a": (True, False),
        "vision-b": (True, True),
        "vision-c": (False, False),
        "speech-a": (True, False),
        "speech-b": (False, False),
    }
    assert ids(bob, custody="failed") == []  # failed once, verified since: not "failed"
    assert ids(bob, custody="verified") == ["vision-a", "vision-b", "speech-a"]


def test_keyset_pages_cover_everything_once(seeded, bob, monkeypatch):
    monkeypatch.setattr(history, "PAGE_SIZE", 2)
    seen, params = [], {}
    while True:
        page = history.page_of(bob, params)
        seen += [run.run_id for run in page.runs]
        if not page.next_cursor:
            break
        params = {"after": page.next_cursor}
    assert seen == ["vision-a", "vision-b", "vision-c", "speech-a", "speech-b"]
    assert ids(bob, after="garbage!!") == seen[:2]  # a bad cursor restarts, never errors


def test_history_page_totals_and_outsider_view(client, seeded, bob, charlie):
    client.force_login(bob)
    page = client.get(reverse("run-list"), {"project": "vision"}).content.decode()
    assert "vision-a" in page and "speech-a" not in page and "secret-a" not in page
    assert "Cost so far" in page
    grouped = history.totals(bob, {})
    by_project = {row["name"]: row for row in grouped["project"]}
    assert sum(row["runs"] for row in grouped["instance"]) == 5
    assert by_project["Vision"]["gpu_hours"] == 6 and by_project["Vision"]["verified"] == 1
    assert set(by_project) == {"Vision", "Speech"}
    client.force_login(charlie)
    page = client.get(reverse("run-list")).content.decode()
    assert "No runs match" in page
    assert client.get(reverse("run-detail", args=["vision-a"])).status_code == 404
    assert client.get(reverse("project-detail", args=["vision"])).status_code == 404


def test_comparison_flags_many_variables_and_shows_the_config_diff(client, bob, project, make_run, source):
    first = make_run(title="a")
    other = source.parent / f"{source.name}-b"
    other.mkdir()
    (other / "config.yaml").write_text((source / "config.yaml").read_text().replace("lr: 0.01", "lr: 0.1"))
    (other / "config.yaml").write_text((other / "config.yaml").read_text().replace("hidden: 64", "hidden: 128"))
    second = make_run(title="b", source_path=str(other))
    client.force_login(bob)
    page = client.get(reverse("run-compare"), {"run": [first.run_id, second.run_id]}).content.decode()
    expected = "Not a one-variable comparison: besides the seed, 2 variables differ (hidden, lr); an ablation"
    assert expected in page
    assert 'data-key="lr"' in page and 'data-key="hidden"' in page and 'data-key="epochs"' not in page
    single = client.get(reverse("run-compare"), {"run": [first.run_id]})
    assert single.status_code == 302  # two or more runs, else back to history with a message


def test_a_member_shares_a_project_and_the_new_member_sees_it(client, seeded, alice, charlie):
    client.force_login(charlie)
    assert client.get(reverse("project-detail", args=["secret"])).status_code == 404
    client.force_login(alice)  # an operator and a member of "secret"
    client.post(reverse("project-add-member", args=["secret"]), {"username": "charlie"})
    client.post(reverse("project-add-member", args=["secret"]), {"username": "nobody"})
    page = client.get(reverse("project-detail", args=["secret"])).content.decode()
    assert "charlie" in page and "No active user named “nobody”." in page
    client.force_login(charlie)
    assert client.get(reverse("project-detail", args=["secret"])).status_code == 200
    assert "secret-a" in ids(charlie)


def test_history_shows_the_metrics_most_runs_log_and_how_long_each_ran(client, seeded, bob):
    """Metric columns from each run's latest curve row, a duration per run, and the page
    never loads a run's curve (deferred) to show them."""
    now = timezone.now()
    logged = {
        "vision-a": ({"epoch": 3, "val_loss": 0.25, "accuracy": 0.91}, timedelta(hours=2, minutes=5), True),
        "vision-b": ({"epoch": 3, "val_loss": 0.5, "bleu": 7.0}, timedelta(seconds=42), True),
        "vision-c": ({"epoch": 1, "val_loss": 1.5}, timedelta(minutes=12), False),  # still running
    }
    for run_id, (row, took, exited) in logged.items():
        Run.objects.filter(run_id=run_id).update(
            curve=[row] * 100, last_metrics=row, launched_at=now - took, exited_at=now if exited else None
        )
    assert history.metric_columns(history.page_of(bob, {"project": "vision"}).runs) == ["val_loss", "accuracy", "bleu"]
    client.force_login(bob)
    page = client.get(reverse("run-list"), {"project": "vision"}).content.decode()
    header = page.split('<table id="history">', 1)[1].split("</thead>", 1)[0]
    assert header.index(">val_loss<") < header.index(">accuracy<") < header.index(">Duration<")
    row = page.split('data-run="vision-a"', 1)[1].split("</tr>", 1)[0]
    assert "0.2500" in row and "0.9100" in row and "2 h 05 min" in row
    assert "42 s" in page.split('data-run="vision-b"', 1)[1].split("</tr>", 1)[0]
    assert "12 min" in page.split('data-run="vision-c"', 1)[1].split("</tr>", 1)[0]
    assert all("curve" in run.get_deferred_fields() for run in history.page_of(bob, {}).runs)


def test_compare_has_a_training_table(client, bob, make_run):
    first = make_run(title="lr 0.01", curve=[{"epoch": 1, "val_loss": 0.9}], last_metrics={"epoch": 1, "val_loss": 0.9})
    second = make_run(title="lr 0.1", curve=[{"epoch": 1, "val_loss": 0.7}], last_metrics={"epoch": 1, "val_loss": 0.7})
    client.force_login(bob)
    page = client.get(reverse("run-compare"), {"run": [first.run_id, second.run_id]}).content.decode()
    training = page.split('id="training"', 1)[1].split("</section>", 1)[0]
    assert "<th>val_loss</th>" in training and "0.9" in training and "0.7" in training
    assert "<th>duration</th>" in training and "<th>epochs logged</th>" in training
    assert '"title": "lr 0.01"' in page.split('id="compare-curves"', 1)[1]  # the charts' legend names runs


def test_compare_counts_an_unverified_runs_overrides(client, bob, make_run):
    """Found by the browser walk: a "like this" run with lr overridden, not yet verified, compared equal
    to its base because compare read the control-side config without the overrides that were shipped."""
    first = make_run(title="base")
    second = make_run(title="lr changed", config_overrides={"lr": 0.003})
    client.force_login(bob)
    page = client.get(reverse("run-compare"), {"run": [first.run_id, second.run_id]}).content.decode()
    row = page.split('data-key="lr"', 1)[1].split("</tr>", 1)[0]
    assert "0.01" in row and "0.003" in row


def test_compare_counts_a_different_dataset_as_a_changed_variable(client, bob, make_run):
    first = make_run(title="imagenet-mini", data_sha256="a" * 64, datasets=["imagenet-mini"])
    second = make_run(title="imagenet-mini, relabelled", data_sha256="b" * 64, datasets=["imagenet-relabelled"])
    client.force_login(bob)
    context = client.get(reverse("run-compare"), {"run": [first.run_id, second.run_id]}).context
    assert context["variables"] == ["dataset"]
    same = make_run(title="same data", data_sha256="a" * 64, datasets=["imagenet-mini"], config_overrides={"lr": 0.5})
    context = client.get(reverse("run-compare"), {"run": [first.run_id, same.run_id]}).context
    assert "dataset" not in context["variables"] and "lr" in context["variables"]
