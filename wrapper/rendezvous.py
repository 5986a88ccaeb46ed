"""`rendezvous`: measured before a run over several boxes starts, never assumed. Rank 0's box listens on
the port its torchrun will host the rendezvous at, for the other boxes to connect within a bound; each
other box connects to rank 0's address and port. One JSON answer each, with the interface each end's
connection went through (`ifname`): the one its collectives are pinned to."""

import json
import socket
import time

from .interfaces import interface_of_socket

MOST_SECONDS = 60


def cmd_rendezvous(request):
    seconds = min(max(float(request.get("seconds") or 15), 1), MOST_SECONDS)
    if "listen" in request:
        answer = _listen(int(request["listen"]), int(request.get("expect") or 0), seconds)
    else:
        address, port = request["connect"]
        answer = _connect(str(address), int(port), seconds)
    print(json.dumps(answer))
    return 0


def _listen(port, expect, seconds):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("", port))
    except OSError as exc:
        server.close()
        return {"listening": False, "reached_by": 0, "why": f"port {port}: {exc}"[:200]}
    server.listen(64)
    server.settimeout(0.5)
    reached, deadline, ifname = 0, time.monotonic() + seconds, ""
    while reached < expect and time.monotonic() < deadline:
        try:
            peer = server.accept()[0]
        except OSError:
            continue
        ifname = ifname or interface_of_socket(peer)
        peer.close()
        reached += 1
    server.close()
    return {"listening": True, "reached_by": reached, "ifname": ifname}


def _connect(address, port, seconds):
    deadline, error = time.monotonic() + seconds, ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=2) as reached:
                return {"reached": True, "ifname": interface_of_socket(reached)}
        except OSError as exc:
            error = f"{address}:{port}: {exc}"[:200]
            time.sleep(0.2)
    return {"reached": False, "why": error}
