"""A run names its secrets by credential name: an unknown one, or one not granted to the run's project,
is a form error or a 4xx naming the field, and nothing is saved."""

import pytest
from django.urls import reverse

from fleet.models import CredentialKind
from runs.models import Run
from tests import factories
from tests.api.test_api import api, post, run_bodies

pytestmark = pytest.mark.django_db


@pytest.fixture
def elsewhere_secret():
    """A run secret granted to another project only."""
    other = factories.project(name="Other", slug="other-proj")
    return factories.credential(CredentialKind.RUN_SECRET, "env:W_KEY", other, name="wandb-other")


@pytest.fixture
def ssh_key_named(project):
    """A credential of another kind granted to the project: not a run secret."""
    return factories.credential(CredentialKind.SSH_KEY, "env:LAB_KEY", project, name="lab-ssh")


@pytest.mark.parametrize(
    ("secret", "words"),
    [
        ("wandb-other", "is not granted to"),
        ("lab-ssh", "No run secret named lab-ssh"),
        ("nobody-registered-this", "No run secret named nobody-registered-this"),
    ],
)
def test_a_secret_the_project_may_not_use_is_refused_by_name(
    client, bob, project, instance, source, elsewhere_secret, ssh_key_named, secret, words
):
    api_body, form = run_bodies(project, instance, source)
    body = {**api_body, "secrets": [secret]}
    api_client, _ = api(bob)
    answer = post(api_client, "/api/runs/", body)
    assert answer.status_code == 400 and words in " ".join(answer.json()["detail"]["secrets"])
    client.force_login(bob)
    form["secrets_text"] = secret
    page = client.post(reverse("run-create"), form)
    assert words in " ".join(page.context["form"].errors["secrets_text"])
    assert not Run.objects.exists()
