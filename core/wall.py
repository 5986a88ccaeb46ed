"""Whether the control host's node user can reach the control plane: measured from its own seat.

A command on the control host runs as REMOTEGPU_LOCAL_NODE_USER, beside the broker, the database and
var/. An unprivileged user is no wall if Redis answers anyone on loopback (a task enqueued there runs as
the worker) or PostgreSQL trusts loopback (the node user is then any role it names). So before a process
that runs commands there starts (`manage.py runstack`, a Celery worker), a probe runs *as that user*, with
only the standard library and no secret, and tries what an attacker there would: a Redis PING with no
password, a PostgreSQL start-up with no password, reading the SQLite file and var/secret_key. Anything
that answers is a problem, named with what to set; nothing is declared.
"""

import json
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.conf import settings

from node.transport.local import LocalTransport

PROBE_TIMEOUT = 20
# The node user's probe: stdin a JSON of targets, stdout a JSON verdict per target. Standard library
# only (the node user has no venv); every read bounded; no credential is ever handed to it.
PROBE = r"""
import json, socket, struct, sys

def connect(target):
    if target.get("unix"):
        sock = socket.socket(socket.AF_UNIX)
        sock.settimeout(3)
        sock.connect(target["unix"])
    else:
        sock = socket.create_connection((target["host"], target["port"]), timeout=3)
        sock.settimeout(3)
    return sock

def redis(target):
    with connect(target) as sock:
        sock.sendall(b"PING\r\n")
        answer = sock.recv(64)
    return "open" if answer.startswith(b"+PONG") else "walled"

def postgres(target):
    body = struct.pack("!i", 196608)
    for key, value in (("user", target["user"]), ("database", target["name"])):
        body += key.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    with connect(target) as sock:
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        answer = sock.recv(9)
    # 'R' with code 0 is AuthenticationOk: the server let us in on our word alone.
    return "open" if answer[:1] == b"R" and answer[5:9] == b"\0\0\0\0" else "walled"

def readable(path):
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError:
        return "walled"
    return "open"

targets, verdicts = json.load(sys.stdin), {}
for key, target in targets.items():
    try:
        probe = {"redis": redis, "postgres": postgres}.get(target["kind"])
        verdicts[key] = probe(target) if probe else readable(target["path"])
    except OSError as exc:
        verdicts[key] = "unreachable: " + type(exc).__name__
print(json.dumps(verdicts))
"""

REDIS_OPEN = (
    "the broker at {where} answers the node user with no password: a task queued there runs as the worker. "
    "Set a password on Redis (requirepass) and put it in REDIS_URL (redis://:PASSWORD@host:port/0)"
)
POSTGRES_OPEN = (
    "the database at {where} lets the node user in with no password (a `trust` line in pg_hba.conf): "
    "require scram-sha-256 for it and put the password in DATABASE_URL"
)
FILE_OPEN = (
    "the node user can read {where}: make the control host's var/ directory readable by the worker's user only "
    "(chmod 700)"
)


def redis_target(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme == "unix":
        return {"kind": "redis", "unix": unquote(parsed.path)}
    return {"kind": "redis", "host": parsed.hostname or "127.0.0.1", "port": parsed.port or 6379}


def database_targets(database: dict) -> dict:
    if database["ENGINE"].endswith("sqlite3"):
        name = str(database["NAME"])
        return {name: {"kind": "file", "path": name}, f"{name}-wal": {"kind": "file", "path": f"{name}-wal"}}
    host, port = database.get("HOST") or "/var/run/postgresql", int(database.get("PORT") or 5432)
    where = {"unix": f"{host}/.s.PGSQL.{port}"} if host.startswith("/") else {"host": host, "port": port}
    user = database.get("USER") or "postgres"
    return {"database": {"kind": "postgres", "user": user, "name": database["NAME"], **where}}


def targets(redis_url: str, database: dict, var_dir: Path) -> dict:
    found = {"broker": redis_target(redis_url), **database_targets(database)}
    secret_key = var_dir / "secret_key"
    found[str(secret_key)] = {"kind": "file", "path": str(secret_key)}
    return found


def describe(key: str, target: dict) -> str:
    if target["kind"] == "file":
        return target["path"]
    return target.get("unix") or f"{target['host']}:{target['port']}"


def problems(node_user: str, redis_url: str, database: dict, var_dir: Path) -> list[str]:
    """What the node user can reach of the control plane, each named with what to set; [] when walled."""
    found = targets(redis_url, database, var_dir)
    with LocalTransport(user=node_user, max_answer=4096) as local:
        result = local.run(["python3", "-c", PROBE], timeout=PROBE_TIMEOUT, stdin=json.dumps(found).encode())
    try:
        verdicts = json.loads(result.stdout) if result.exit_code == 0 else None
    except ValueError:
        verdicts = None
    if not isinstance(verdicts, dict):
        return [f"the wall around the control plane could not be measured as {node_user!r}: {result.stderr[-200:]}"]
    said = []
    for key, target in found.items():
        verdict = verdicts.get(key)
        if verdict == "open":
            text = {"redis": REDIS_OPEN, "postgres": POSTGRES_OPEN}.get(target["kind"], FILE_OPEN)
            said.append(text.format(where=describe(key, target)))
        elif target["kind"] != "file" and verdict != "walled":
            said.append(f"the wall could not be measured at {describe(key, target)}: {verdict}")
    return said


def startup_problems(redis_url: str | None = None) -> list[str]:
    """The deployment's own wall, where it runs commands on the control host as a separate user."""
    if not (settings.LOCAL_NODE and settings.LOCAL_NODE_USER):
        return []
    url = redis_url or settings.CELERY_BROKER_URL
    return problems(settings.LOCAL_NODE_USER, url, settings.DATABASES["default"], Path(settings.VAR_DIR))


def refuse_to_start(redis_url: str | None = None) -> None:
    """Stop a starting process whose node user could reach the control plane, saying why."""
    found = startup_problems(redis_url)
    if found:
        sys.stderr.write(start_refusal(found) + "\n")
        raise SystemExit(78)  # EX_CONFIG


def start_refusal(found: list[str]) -> str:
    return (
        f"RemoteGPU will not start: it runs commands on the control host as {settings.LOCAL_NODE_USER!r}, "
        "and that user reaches the control plane:\n- " + "\n- ".join(found)
    )
