"""The CLI asks for a rent over the API and reads it back; a bad request is the API's clear refusal."""

import pytest

from api.models import ApiToken
from tests import factories
from tests.api.test_cli_e2e import cli
from tests.provider_stub import api_credential

pytestmark = pytest.mark.django_db(transaction=True)


def test_rent_and_read_it_back_from_the_command_line(live_server, project, bob):
    ssh = factories.ssh_key(project, "/keys/id_ed25519")
    key = api_credential(project)
    _, token = ApiToken.objects.issue(bob, "cli")
    asked = cli(
        live_server,
        token,
        *("rent", project.slug, "--gpu", "A100", "--gpu", "H100", "--gpu-memory", "40", "--max-rate", "2.50"),
        *("--candidate", f"lambda={key.name}", "--candidate", f"vastai={key.name}", "--ssh-key", ssh.name),
        *("--minutes", "90", "--acknowledge", "--region", "us-west-1", "--image", "pytorch/pytorch@sha256:" + "e" * 64),
        timeout=60,
    )
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "requested, at most $3.75, no envelope set" in asked.stdout
    rental_id = asked.stdout.split("#", 1)[1].split()[0]
    read = cli(live_server, token, "rental", rental_id, timeout=60)
    assert read.returncode == 0 and f"{project.slug}-train-r{rental_id}-" in read.stdout and "requested" in read.stdout
    from rentals.models import Rental

    rental = Rental.objects.get(pk=rental_id)
    assert rental.region == "us-west-1" and rental.image_digest == "sha256:" + "e" * 64
    lost = cli(
        live_server,
        token,
        *("rent", project.slug, "--gpu", "A100", "--max-rate", "1", "--candidate", f"vastai={key.name}"),
        *("--ssh-key", ssh.name, "--minutes", "10", "--acknowledge", "--prove-on", "no-such-box"),
        timeout=60,
    )
    assert lost.returncode == 2 and "proving_box" in lost.stderr

    refused = cli(
        live_server,
        token,
        *("rent", project.slug, "--gpu", "A1OO", "--max-rate", "1", "--candidate", f"vastai={key.name}"),
        *("--ssh-key", ssh.name, "--minutes", "10"),
        timeout=60,
    )
    assert refused.returncode == 2 and "not a GPU model we know" in refused.stderr
    malformed = cli(
        live_server,
        token,
        "rent",
        project.slug,
        "--gpu",
        "A100",
        "--max-rate",
        "1",
        "--candidate",
        "vastai",
        "--ssh-key",
        ssh.name,
        "--minutes",
        "10",
        timeout=60,
    )
    assert malformed.returncode == 2 and "PROVIDER=API_KEY_NAME" in malformed.stderr
