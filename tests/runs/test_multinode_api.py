"""A run over several SSH boxes is asked through the API: its other boxes by name (the project's, each
once, none the run's own nor a cluster's login node), its torchrun options by the Slurm run's rule, and a
command torchrun can start. Bad input is a 400 that makes nothing; the run page shows every node."""

import json

import pytest
from django.test import Client

from api.models import ApiToken
from runs.models import Run, RunPeer
from tests import factories

pytestmark = pytest.mark.django_db


def box_like(project, box_row, profile="generic-ssh"):
    kept = ("credential", "host", "port", "user", "state", "data_root_override")
    kept += ("host_key_type", "host_key_base64", "host_key_confirmed_at")
    return factories.box(project, profile, **{name: getattr(box_row, name) for name in kept})


def test_the_api_makes_a_run_over_several_boxes_and_refuses_what_cannot_run(bob, client, project, box_row, source):
    box2, box3 = box_like(project, box_row), box_like(project, box_row)
    cluster, elsewhere = box_like(project, box_row, "slurm"), box_like(factories.project(), box_row)
    _, token = ApiToken.objects.issue(bob, "test")
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    body = {"project": project.slug, "instance": box_row.name, "source_kind": "local_dir"}
    body |= {"source_path": str(source), "config_path": "config.yaml", "command": ["python3", "train.py"]}

    def post(**extra):
        return api.post("/api/runs/", data=json.dumps({**body, **extra}), content_type="application/json")

    for peers, said in (
        ([box_row.name], "each another box of the project"),
        ([box2.name, box2.name], "each another box of the project"),
        ([cluster.name], "not a cluster's login node"),
        ([elsewhere.name], "each another box of the project"),
        (["no-such-box"], "no-such-box"),
    ):
        refused = post(peer_boxes=peers)
        assert refused.status_code == 400 and said in json.dumps(refused.json()), (peers, refused.content)
    refused = post(peer_boxes=[box2.name], multinode={"nodes": 3, "collective_timeout_seconds": 1})
    said = json.dumps(refused.json())
    assert "nodes: not a multinode option" in said and "collective timeout: 10 to 86400 seconds" in said
    assert "torchrun starts that script" in json.dumps(post(peer_boxes=[box2.name], command=["bash", "x.sh"]).json())
    assert post(multinode={"ifname": "lo"}).status_code == 400  # options without other boxes
    assert not Run.objects.exists() and not RunPeer.objects.exists()

    options = {"collective_timeout_seconds": 60, "ifname": "eth0"}
    created = post(peer_boxes=[box3.name, box2.name], multinode=options)
    assert created.status_code == 201, created.content
    run = Run.objects.get()
    assert run.scheduler == {"multinode": options} and run.is_multinode
    assert [(peer.rank, peer.instance.name) for peer in run.peers.all()] == [(1, box3.name), (2, box2.name)]
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-nodes"' in page and "one run over 3 boxes" in page and "collectives time out after 60 s" in page
    assert page.index(box3.name) < page.index(box2.name)
    assert "Run created on " in run.events.first().message and "(3 nodes, rank 0 on" in run.events.first().message


def test_a_run_over_several_boxes_costs_the_sum_of_its_boxes(box_row, project):
    from decimal import Decimal

    from runs.spend import expected_cost, running_rate

    box2 = box_like(project, box_row)
    for box, rate in ((box_row, "2.00"), (box2, "1.50")):
        type(box).objects.filter(pk=box.pk).update(rate_running=Decimal(rate))
    run = factories.run(box_row, expected_minutes=60, scheduler={"multinode": {}})
    RunPeer.objects.create(run=run, instance=box2, rank=1)
    run = Run.objects.select_related("instance").get(pk=run.pk)
    assert running_rate(run) == Decimal("3.50") and expected_cost(run) == Decimal("3.50")


def test_another_boxs_node_of_a_live_run_holds_its_box_for_teardown(box_row, project):
    """A shutdown or a release checks what runs on the box: the node of a live run counts as the run's own."""
    from delivery import facts
    from runs.models import RunState

    box2 = box_like(project, box_row)
    run = factories.run(box_row, state=RunState.RUNNING, scheduler={"multinode": {}})
    RunPeer.objects.create(run=run, instance=box2, rank=1)
    assert facts.load([box2])[box2.pk].live == [run.run_id]
    Run.objects.filter(pk=run.pk).update(state=RunState.EXPORTED)
    assert facts.load([box2])[box2.pk].live == []


def test_the_run_form_takes_the_other_boxes_and_keeps_them_on_an_edit(client, bob, project, box_row, source):
    from django.urls import reverse

    box2, cluster = box_like(project, box_row), box_like(project, box_row, "slurm")
    client.force_login(bob)
    form = {"project": project.pk, "instance": box_row.pk, "title": "over two", "source_kind": "local_dir"}
    form |= {"source_path": str(source), "command_line": "python3 train.py", "config_path": "config.yaml"}
    form |= {"expected_minutes": "30", "checkpoint_mib": "100", "checkpoints_retained": "2", "scratch_mib": "0"}
    form |= {"expected_files": "1000"}
    page = client.post(reverse("run-create"), {**form, "peer_boxes": [box_row.pk]}).content.decode()
    assert "each another box of the run&#x27;s project" in page and not Run.objects.exists()
    page = client.post(reverse("run-create"), {**form, "peer_boxes": [box2.pk], "command_line": "bash x.sh"})
    assert "torchrun starts that script" in page.content.decode() and not Run.objects.exists()
    offered = client.get(reverse("run-create")).context["form"].fields["peer_boxes"].queryset
    assert box2 in offered and cluster not in offered  # a login node is never another box of a run
    options = {"slurm_collective_timeout_seconds": "45", "slurm_ifname": "eth0"}
    response = client.post(reverse("run-create"), {**form, "peer_boxes": [box2.pk], **options})
    assert response.status_code == 302, response.content.decode()[:3000]
    run = Run.objects.get()
    assert run.scheduler == {"multinode": {"collective_timeout_seconds": 45, "ifname": "eth0"}}
    assert [peer.instance for peer in run.peers.all()] == [box2]
    edit = reverse("run-edit", args=[run.run_id])
    client.post(edit, {**form, "title": "renamed", **options})
    run.refresh_from_db()
    assert run.title == "renamed" and run.is_multinode and run.peers.count() == 1
