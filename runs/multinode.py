"""A run over several SSH boxes: one run, one history, one export. The run's own box is rank 0: it hosts
the rendezvous and seals the export; every other box (a RunPeer) runs its node of the same torchrun under
its own wrapper, which owns that node's process tree and seals nothing.

Here: what the control side does with the other boxes at preflight (each one proven as the run's own box
is, their environments compared, the rendezvous measured from every box to rank 0's), at launch (every
peer started before rank 0), and after (their statuses read, a node's failure named, every node stopped).
"""

import random
import threading

from django.conf import settings

from fleet.node_client import NodeClient
from node import slurm
from node.protocol import NodeError
from node.transport import TransportError
from runs import shipping
from runs.box_spec import run_node

RENDEZVOUS_SECONDS = 20


def peers_of(run) -> list:
    return list(run.peers.select_related("instance", "instance__project"))


def identity(environment: dict) -> str:
    """What every node must share: the interpreter's version, torch's and its CUDA build."""
    said = environment or {}
    return f"python {said.get('python', '?')}, torch {said.get('torch', 'missing')}, cuda {said.get('cuda')}"


def preflight_peers(run, head, head_report: dict) -> tuple[dict, list[str]]:
    """Each other box proven as the run's own box is (its source shipped, its inputs and environment read),
    the environments compared with rank 0's (a difference fails closed), and the rendezvous measured: rank
    0's box listens on the port torchrun will use, every other box must reach it within 20 s; the interface
    each box's connection went through is kept, for its collectives to be pinned to."""
    peers = peers_of(run)
    if not peers:
        return {}, []
    reports, problems = {}, []
    for peer in peers:
        with run_node(run, peer=peer) as node:
            node.prepare()
            shipping.ship_source(node)
            reports[peer.rank] = node.call("preflight", node.write_spec("preflight", node.spec(0)), timeout=300)
        problems += [
            f"Node {peer.rank} ({peer.instance.name}): missing {item['input']}"
            for item in reports[peer.rank]["missing"]
        ]
    heads = identity(head_report.get("environment"))
    differ = [
        f"{peer.instance.name}: {identity(reports[peer.rank].get('environment'))}"
        for peer in peers
        if identity(reports[peer.rank].get("environment")) != heads
    ]
    if differ:
        said = "; ".join([f"{run.instance.name} (rank 0): {heads}", *differ])
        problems.append(f"The nodes' environments differ ({said}); a run over several boxes needs one")
    meeting = measure_rendezvous(run, head, peers)
    problems += meeting.pop("problems")
    nodes = [
        {"rank": peer.rank, "box": peer.instance.name, "environment": identity(reports[peer.rank].get("environment"))}
        for peer in peers
    ]
    return {"peers": nodes, "rendezvous": meeting}, problems


def measure_rendezvous(run, head, peers) -> dict:
    """Rank 0's box listens while every other box connects to it: reached, or named."""
    address, port = run.instance.host or "127.0.0.1", random.randint(20000, 39999)
    heard: dict = {}
    listening = threading.Thread(target=_listen, args=(head, port, len(peers), heard), daemon=True)
    listening.start()
    reached = {}
    for peer in peers:
        try:
            with run_node(run, peer=peer) as node:
                request = {"connect": [address, port], "seconds": RENDEZVOUS_SECONDS}
                reached[peer.rank] = node.invoke(node.layout.tools, "rendezvous", request=request, timeout=60)
        except (TransportError, NodeError) as exc:
            reached[peer.rank] = {"reached": False, "why": str(exc)[:200]}
    listening.join(timeout=RENDEZVOUS_SECONDS + 60)
    problems = [
        f"Node {peer.rank} ({peer.instance.name}) could not reach the rendezvous {address}:{port} on "
        f"{run.instance.name}: {reached[peer.rank].get('why') or 'no answer'}"
        for peer in peers
        if reached[peer.rank].get("reached") is not True
    ]
    if heard.get("listening") is False:
        problems.append(f"Rank 0's box cannot listen for the rendezvous: {heard.get('why', '')}")
    ifnames = {"0": heard.get("ifname")} | {str(peer.rank): reached[peer.rank].get("ifname") for peer in peers}
    return {"address": address, "port": port, "reached_by": heard.get("reached_by", 0), "of": len(peers)} | {
        "ifnames": {rank: name for rank, name in ifnames.items() if slurm.interface_name(name)},
        "problems": problems,
    }


def _listen(head, port: int, expect: int, heard: dict) -> None:
    request = {"listen": port, "expect": expect, "seconds": RENDEZVOUS_SECONDS}
    try:
        heard.update(head.invoke(head.layout.tools, "rendezvous", request=request, timeout=RENDEZVOUS_SECONDS + 30))
    except (TransportError, NodeError) as exc:
        heard.update(listening=False, why=str(exc)[:200])


def launch_peers(run, attempt: int, env: dict) -> None:
    """Every other box's node started, detached, before rank 0's (which hosts the rendezvous the others
    wait for). A peer already running this attempt (a redelivered launch) is left as it is."""
    for peer in peers_of(run):
        with run_node(run, env=env, peer=peer) as node:
            node.prepare()
            if not node.call("status", node.attempt_spec(attempt))["launched"]:
                node.launch(attempt, use_tmux=False)


def peer_statuses(run) -> dict:
    """Each other box's word on this attempt: {rank: status}, or {"unreachable": why} where it did not
    answer or answered something that is not a status. The watcher's own probe, one round-trip per box,
    its answer checked (fleet.node_client.NodeClient.probe)."""
    found = {}
    for peer in peers_of(run):
        try:
            with NodeClient(peer.instance) as node:
                status = node.probe([run])["runs"].get(run.run_id) or {"error": "no status of the run"}
        except (TransportError, NodeError) as exc:
            status = {"error": str(exc)}
        found[peer.rank] = {"unreachable": str(status["error"])[:300]} if "error" in status else status
    return found


def stop_peers(run, attempt: int, by: str, node_failed: bool = False, ranks=None) -> list[str]:
    """Every other box's node of the attempt (or those of `ranks`) stopped: its wrapper ends its whole tree.
    node_failed: the stop is because a node failed (the node's reason says so). What was said, per box."""
    said = []
    request = {"by": by, "grace_seconds": settings.RUN_STOP_GRACE_SECONDS, "node_failed": node_failed}
    for peer in peers_of(run):
        if ranks is not None and peer.rank not in ranks:
            continue
        try:
            with run_node(run, peer=peer) as node:
                answer = node.invoke(node.layout.tools, "stop", node.layout.spec(f"attempt-{attempt}"), request=request)
                said.append(f"{peer.instance.name}: {'stopped' if answer.get('stopped') else 'not running'}")
        except (TransportError, NodeError) as exc:
            said.append(f"{peer.instance.name}: could not be reached ({str(exc)[:120]})")
    return said
