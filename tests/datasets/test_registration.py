"""Registering a dataset: bad input is a form error or a 4xx naming the field, and nothing is saved."""

import hashlib
import json
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from core.models import AuditEntry
from datasets.models import Dataset, DatasetState
from tests import factories
from tests.api.test_api import api, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir():
    root = Path(settings.VAR_DIR) / "sources" / f"ds-{uuid.uuid4().hex[:8]}"
    (root / "train").mkdir(parents=True)
    (root / "train" / "a.bin").write_bytes(b"a" * 100)
    (root / "b.txt").write_text("b\n")
    return root


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


GOOD_ROSTER = [entry("b.txt", b"b\n"), entry("train/a.bin", b"a" * 100)]


@pytest.fixture
def others_box():
    other = factories.project(name="Other", slug="other-ds")
    return factories.box(name="other-ds-box-20261202", project=other, profile_key="runpod")


BAD = [
    ({"source_kind": "control", "source_path": "/etc"}, "source_path", "outside the allowed roots"),
    ({"source_kind": "box", "source_path": "/data/../etc", "source_instance": "BOX"}, "source_path", "'..'"),
    ({"source_kind": "box", "source_path": "relative/dir", "source_instance": "BOX"}, "source_path", "absolute"),
    ({"source_kind": "box", "source_path": "/data"}, "source_instance", "Name the box"),
    ({"source_kind": "box", "source_path": "/data", "source_instance": "OTHERS"}, "source_instance", "no instance"),
    ({"roster": [{**GOOD_ROSTER[0], "path": "../x"}]}, "roster", "no '..'"),
    ({"roster": [{**GOOD_ROSTER[0], "sha256": "abc"}]}, "roster", "64 lowercase hex"),
    ({"roster": [GOOD_ROSTER[0], GOOD_ROSTER[0]]}, "roster", "named twice"),
    ({"roster": GOOD_ROSTER[:1]}, "roster", "train/a.bin is in the directory but not in the roster"),
    ({"roster": [GOOD_ROSTER[0], entry("train/a.bin", b"x" * 100)]}, "roster", "train/a.bin has SHA-256"),
    ({"name": "Bad Name"}, "name", "slug"),
]


@pytest.mark.parametrize(("change", "field", "words"), BAD)
def test_bad_registrations_name_the_field_and_save_nothing(
    bob, client, project, instance, others_box, data_dir, change, field, words
):
    body = {"project": project.slug, "name": "mnist", "source_kind": "control", "source_path": str(data_dir), **change}
    names = {"BOX": instance.name, "OTHERS": others_box.name}
    body = {key: names.get(value, value) if isinstance(value, str) else value for key, value in body.items()}
    api_client, _ = api(bob)
    answer = post(api_client, "/api/datasets/", body)
    assert answer.status_code == 400, answer.content
    assert words in json.dumps(answer.json()["detail"][field]), answer.json()
    assert not Dataset.objects.exists() and not AuditEntry.objects.filter(action__startswith="dataset.").exists()


def test_the_form_shows_the_same_refusal(bob, client, project, data_dir):
    client.force_login(bob)
    form = {"project": project.pk, "name": "mnist", "source_kind": "control", "source_path": str(data_dir)}
    page = client.post(reverse("dataset-create"), {**form, "roster_text": json.dumps(GOOD_ROSTER[:1])})
    assert "train/a.bin is in the directory but not in the roster" in page.context["form"].errors["roster_text"][0]
    page = client.post(reverse("dataset-create"), {**form, "roster_text": "[not json"})
    assert "Not JSON" in page.context["form"].errors["roster_text"][0]
    assert not Dataset.objects.exists()


def test_a_control_host_dataset_is_hashed_at_once_and_audited(bob, client, project, data_dir):
    api_client, _ = api(bob)
    body = {"project": project.slug, "name": "mnist", "source_kind": "control", "source_path": str(data_dir)}
    answer = post(api_client, "/api/datasets/", {**body, "roster": list(reversed(GOOD_ROSTER))})
    assert answer.status_code == 201, answer.content
    dataset = Dataset.objects.get()
    assert dataset.state == DatasetState.READY and dataset.roster == GOOD_ROSTER and dataset.file_count == 2
    assert answer.json()["roster_sha256"] == dataset.roster_sha256
    entry_ = AuditEntry.objects.get(action="dataset.registered")
    assert entry_.project_id == project.pk and entry_.data["roster_sha256"] == dataset.roster_sha256
    client.force_login(bob)
    page = client.get(dataset.get_absolute_url()).content.decode()
    assert dataset.roster_sha256 in page and "train/a.bin" in page
    again = post(api_client, "/api/datasets/", body)
    assert again.status_code == 400 and "already has a dataset named mnist" in json.dumps(again.json())


def test_an_outsider_or_reader_cannot_register(carol, charlie, project, data_dir):
    body = {"project": project.slug, "name": "mnist", "source_kind": "control", "source_path": str(data_dir)}
    for person in (carol, charlie):
        answer = post(api(person)[0], "/api/datasets/", body)
        assert answer.status_code in (400, 403), answer.content
    assert not Dataset.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_registrations_of_one_name_at_once_make_one_dataset(bob, project, data_dir):
    from datasets.actions import do_register_dataset
    from tests.racing import at_once

    def register():
        return do_register_dataset(project, "mnist", "control", str(data_dir), actor=bob).name

    outcomes = at_once(register, register)
    assert sorted(outcomes) == sorted(["mnist", f"{project.name} already has a dataset named mnist."]), outcomes
    assert Dataset.objects.count() == 1 and AuditEntry.objects.filter(action="dataset.registered").count() == 1


@pytest.mark.parametrize(
    "need",
    [
        [{"path": "../../etc/passwd", "offset": 0}],
        [{"path": "b.txt"}],
        [{"path": "b.txt", "offset": -1}],
        [{"path": "b.txt", "offset": 10**9}],
        [{"path": "b.txt", "offset": "0"}],
        [{"path": "b.txt", "offset": 0}, {"path": "b.txt", "offset": 0}],
        ["b.txt"],
    ],
)
def test_a_box_that_answers_a_garbage_need_stops_the_stage_by_name(need):
    """What the control host reads and sends is what the roster says, whatever the box claims to need."""
    from datasets.staging import StageFailed, checked_need

    with pytest.raises(StageFailed, match="not one of this dataset's files"):
        checked_need(need, GOOD_ROSTER)
    assert checked_need([{"path": "b.txt", "offset": 1}], GOOD_ROSTER) == [{"path": "b.txt", "offset": 1}]
