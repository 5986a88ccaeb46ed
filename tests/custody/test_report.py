"""The verification report of a run: what is usable and verified first, then the residuals, then the
evidence index; one self-contained page (no scripts, no outside files) and the same facts as JSON."""

import pytest
from django.urls import reverse

from custody.models import Artifact
from runs.models import RunState
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_verified_run_has_a_report_that_leads_with_what_is_usable(client, bob, carol, make_run):
    run = make_run(state=RunState.EXPORTED, data_sha256="d" * 64, env_identity={"python": "3.11.7", "torch": "2.13.0"})
    client.force_login(bob)
    answer = client.get(reverse("run-report", args=[run.run_id]), follow=True)
    assert "verify custody first" in answer.content.decode()  # nothing to report yet: back to the run
    evidence = {
        "metrics": [
            {
                "test": "synthetic",
                "name": "accuracy",
                "direction": "↑",
                "claimed": 0.94,
                "recomputed": 0.94,
                "delta": 0.0,
                "within_tolerance": True,
            }
        ],
        "reproducibility": {"seeds": {"seed": 7}, "determinism": {"cudnn_benchmark": False}},
        "population": {"synthetic": {"declared": 307, "covered": 307, "sha256": "e" * 64}},
    }
    record = factories.verified_record(
        run,
        uri="/custody/x",
        evidence=evidence,
        warnings=["test/synthetic: no vis/ (visuals are paperwork, not evidence)"],
        file_count=3,
    )
    for path in ("best.pth", "train.csv", "test/synthetic/results.parquet"):
        Artifact.objects.create(record=record, path=path, bytes=10, sha256=path[0] * 64, verified=True)
    page = client.get(reverse("run-report", args=[run.run_id])).content.decode()
    assert "<script" not in page and "<link" not in page  # self-contained: prints and attaches as one file
    assert (
        page.index('id="verdict"')
        < page.index('id="usable"')
        < page.index('id="residuals"')
        < page.index('id="evidence-index"')
    )
    usable = page.split('id="usable"', 1)[1].split("</table>", 1)[0]
    assert "best.pth" in usable and "results.parquet" in usable and "train.csv" not in usable
    assert "Verified" in page and "seed=7" in page and "synthetic: 307 of" in page and "no vis/" in page
    data = client.get(reverse("run-report", args=[run.run_id]), {"format": "json"}).json()
    assert data["status"] == "verified" and data["reproducibility"]["seeds"] == {"seed": 7}
    assert data["run"]["data_sha256"] == "d" * 64 and len(data["artifacts"]) == 3
    assert 'id="report-link"' in client.get(run.get_absolute_url()).content.decode()
    client.force_login(carol)  # a member without a role reads it too
    assert client.get(reverse("run-report", args=[run.run_id])).status_code == 200
