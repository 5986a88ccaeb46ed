"""Staging a run's datasets onto its box (part of preflight): what is missing moves, hashed as it lands.

Three sources, one frame format (the wrapper's staging.py: a JSON header line, then exactly its bytes):
- a control-host directory: the frames are read here and sent over one SSH channel to `stage-receive`;
- a directory on the run's own box: `stage-pull` copies it there, through a pipe on the box;
- another box of the project: `stage-pull` on the run's box opens one ssh stream to the source box with a
  temporary key that may run only `stage-send` of that one root (added with `stage-grant`, removed when the
  stage ends, however it ends); the bytes go box to box and never through the control host.
A file cut off halfway resumes at its size next time; the first file that does not match its roster
ends the stage, named.
"""

import json
import posixpath
import shlex
import time
import uuid
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from core.paths import confined_directory
from datasets.models import DatasetSource
from fleet.node_client import NodeClient
from node.build import wrapper_name
from node.protocol import NodeError, check_answer
from platforms.layout import resolve_home

BLOCK = 1 << 20


class StageFailed(NodeError):
    """The stage did not finish; the message says where it stopped (a file, a cut, a refused key)."""


def stage(node, dataset, progress=None, reserve: int = 0) -> dict:
    """Stage one dataset onto node (a RunNode, open): {"target", "moved", "complete"}; StageFailed else.
    reserve: bytes the run itself needs on that disk after it (its storage budget), kept free too."""
    target = posixpath.join(node.layout.cache, dataset.staged_dir)
    request = {"target": target, "roster_sha256": dataset.roster_sha256, "files": dataset.roster}
    tools = node.layout.tools
    # Staged before: hashed again whole where that is cheap, so a file changed on the box is caught.
    rehash = dataset.total_bytes <= settings.STAGE_REHASH_MAX_BYTES
    check = node.invoke(
        tools, "stage-check", request={**request, "rehash": rehash}, timeout=settings.STAGE_TIMEOUT, bound=True
    )
    if check["complete"]:
        return {"target": target, "moved": 0, "complete": True, "damaged": []}
    damaged = [str(path)[:300] for path in check.get("damaged") or []][:50]
    need = checked_need(check["need"], dataset.roster)
    refused = space_problem(dataset, need, check, reserve)
    if refused:
        raise StageFailed(refused)
    if dataset.source_kind == DatasetSource.CONTROL:
        answer = _from_control(node, dataset, request, need, progress)
    elif dataset.source_instance_id == node.instance.pk:
        answer = _pulled(node, {**request, "source": {"local_root": _node_path(dataset, node.home)}}, progress)
    else:
        answer = _from_box(node, dataset, request, progress)
    if not answer["complete"]:
        raise StageFailed(f"dataset {dataset.name}: the stage ended with files still missing")
    return {"target": target, "moved": answer["received"], "complete": True, "damaged": damaged}


def space_problem(dataset, need: list[dict], check: dict, reserve: int) -> str | None:
    """Why the stage may not start for lack of space (nothing moved yet), or None. The box's figure is
    untrusted: one that is not a whole number of bytes refuses the stage too (fail closed)."""
    sizes = {item["path"]: item["bytes"] for item in dataset.roster}
    missing = sum(sizes[item["path"]] - item["offset"] for item in need)
    free = check.get("free_bytes")
    if type(free) is not int or free < 0:
        return f"dataset {dataset.name}: the box did not say how much space its cache disk has free; nothing staged"
    margin = settings.STORAGE_MARGIN_MIN_BYTES
    if missing + reserve + margin <= free:
        return None
    gib = 1024**3
    where = str(check.get("measured_at") or "the cache disk")[:300]
    return (
        f"dataset {dataset.name} needs {missing / gib:.2f} GiB more on {where}, and the run {reserve / gib:.2f} GiB "
        f"after it (+ {margin / gib:.2f} GiB margin), but {free / gib:.2f} GiB is free: refused before staging, "
        "nothing moved. Free space, or use a box with a bigger disk."
    )


def _node_path(dataset, home: str) -> str:
    return resolve_home(dataset.source_path, home)


def checked_need(need, roster: list[dict]) -> list[dict]:
    """What the box says it still needs, as the control side will read it: each a roster path once, with a
    whole-number offset within its size; StageFailed on anything else (the box is untrusted)."""
    sizes = {item["path"]: item["bytes"] for item in roster}
    kept, seen = [], set()
    for item in need:
        path = item.get("path") if isinstance(item, dict) else None
        offset = item.get("offset") if isinstance(item, dict) else None
        if path not in sizes or path in seen or type(offset) is not int or not 0 <= offset <= sizes[path]:
            raise StageFailed(f"the box answered a need that is not one of this dataset's files: {str(item)[:200]}")
        seen.add(path)
        kept.append({"path": path, "offset": offset})
    return kept


def _from_control(node, dataset, request: dict, need: list[dict], progress) -> dict:
    root = confined_directory(dataset.source_path, settings.SOURCE_ROOTS)
    frames = _frames(root, need, progress)
    head = json.dumps(request).encode() + b"\n"
    try:
        return node.streamed(node.layout.tools, "stage-receive", _chain(head, frames), settings.STAGE_TIMEOUT)
    except NodeError as exc:
        raise StageFailed(f"dataset {dataset.name}: {exc}") from None


def _chain(first: bytes, rest):
    yield first
    yield from rest


def _frames(root: Path, need: list[dict], progress):
    """The frames of what the box needs, read from the control host's directory (inside its root only)."""
    sent = 0
    for index, item in enumerate(need):
        path = (root / item["path"]).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            yield json.dumps({"path": item["path"], "missing": True}).encode() + b"\n"
            continue
        offset = int(item["offset"])
        size = path.stat().st_size
        yield json.dumps({"path": item["path"], "offset": offset, "bytes": max(size - offset, 0)}).encode() + b"\n"
        with path.open("rb") as handle:
            handle.seek(offset)
            for block in iter(lambda: handle.read(BLOCK), b""):
                yield block
                sent += len(block)
                if progress:
                    progress(sent, index)
    yield json.dumps({"sent": sent, "files": len(need)}).encode() + b"\n"


def _pulled(node, request: dict, progress) -> dict:
    """stage-pull on the run's box, read as it reports: its progress lines, then its answer."""
    request = {**request, "rate": settings.STAGE_BYTES_PER_SECOND}
    feed = node.lines_of(node.layout.tools, "stage-pull", request, settings.STAGE_TIMEOUT)
    deadline = time.monotonic() + settings.STAGE_TIMEOUT
    try:
        while not feed.ended and time.monotonic() < deadline:
            for line in feed.lines(1.0):
                try:
                    said = json.loads(line)
                except ValueError:
                    continue
                if isinstance(said, dict) and isinstance(said.get("progress"), dict):
                    if progress:
                        progress(int(said["progress"].get("bytes") or 0), int(said["progress"].get("files") or 0))
                    continue
                return check_answer("stage-pull", said)
    finally:
        feed.close()
    raise StageFailed("the stage gave no answer (the box's stage-pull ended or ran past STAGE_TIMEOUT)")


def forced_command(python: str, wrapper: str, root: str) -> str:
    """The one command the temporary key may run, with its own deadline: a sender that hangs (a source
    that stalls, a receiver gone without closing) never outlives the stage that granted it."""
    deadline = ["timeout", "-k", "10", str(int(settings.STAGE_TIMEOUT))]
    return shlex.join([*deadline, python, "-I", "-S", wrapper, "stage-send", root])


def _from_box(node, dataset, request: dict, progress) -> dict:
    """Box to box: a key good for `stage-send` of this root only, on the source, for as long as this takes."""
    source = dataset.source_instance
    if source.profile.is_local:
        raise StageFailed(
            f"dataset {dataset.name} is on the control host's own node: register it as a control-host dataset"
        )
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    marker = f"remotegpu-stage-{int(time.time())}-{uuid.uuid4().hex[:16]}"
    with NodeClient(source) as box:
        box.install_wrapper(box.tools)
        python = box.python or settings.NODE_PYTHON
        command = forced_command(python, f"{box.tools}/{wrapper_name()}", _node_path(dataset, box.home))
        if '"' in command or "\n" in command:
            raise StageFailed(f"dataset {dataset.name}: its path cannot be written into a restricted key")
        # Keys older than two stages' time are a dead worker's: removed with this grant.
        grant = {"file": settings.NODE_AUTHORIZED_KEYS, "marker": marker}
        grant["expire_before"] = time.time() - 2 * settings.STAGE_TIMEOUT
        line = f'restrict,command="{command}" {public.decode()} {marker}'
        box.invoke(box.tools, "stage-grant", request={**grant, "action": "add", "line": line})
        try:
            pinned = source.pinned_host_key
            host = source.host if source.port == 22 else f"[{source.host}]:{source.port}"
            where = {"host": source.host, "port": source.port, "user": source.user, "key": private}
            where["known_host"] = f"{host} {pinned.key_type} {pinned.key_base64}"
            return _pulled(node, {**request, "source": where}, progress)
        finally:
            box.invoke(box.tools, "stage-grant", request={**grant, "action": "remove"})
