"""A box's page states what was measured, once. Before: "Nothing of ours runs on it." stood beside the
teardown card's "Blocked: … still live" on a box that ran another box's run as its node (the sentence read
the box's own runs, the card every run with a node there)."""

import pytest

from runs.models import RunPeer, RunState
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_box_running_a_node_of_another_boxs_run_never_says_nothing_runs_on_it(client, alice, bob):
    project = factories.project(alice, bob)
    head, node = factories.box(project, state="running"), factories.box(project, state="running")
    run = factories.run(head, state=RunState.RUNNING, scheduler={"multinode": {"nodes": 2}})
    RunPeer.objects.create(run=run, instance=node, rank=1)
    client.force_login(bob)
    page = client.get(node.get_absolute_url()).content.decode()
    assert f"{run.run_id} still live" in page and "Nothing of ours runs on it" not in page
    run.state = RunState.EXPORTED
    run.save()
    idle = client.get(node.get_absolute_url()).content.decode()
    assert "Nothing of ours runs on it" in idle and "still live" not in idle
