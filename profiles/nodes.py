"""A node: open a transport to an instance (LocalTransport for the local profile, SSHTransport
otherwise) and call the node wrapper on it through one method, `InstanceNode.invoke`."""

import hashlib
import json
import posixpath
import time
import uuid
from pathlib import Path

from django.conf import settings

from profiles.control_host import local_node_problem
from profiles.credentials import ssh_auth
from profiles.layout import NodeLayout, resolve_home
from profiles.protocol import NodeError, check_answer, known_status, parse_answer, status_problem
from profiles.transport import (
    AnswerTooLarge,
    CredentialError,
    LocalTransport,
    SSHTransport,
    Transport,
    scan_host_key,
)


def transport_for(instance) -> Transport:
    if instance.profile.is_local:
        # Fail closed, at every use: a box registered while it was allowed runs nothing once it is not.
        problem = local_node_problem()
        if problem:
            raise CredentialError(problem)
        return LocalTransport(user=settings.LOCAL_NODE_USER or None, max_answer=settings.NODE_ANSWER_MAX_BYTES)
    return SSHTransport(
        instance.host,
        instance.port,
        instance.user,
        pinned=instance.pinned_host_key,
        auth=ssh_auth(instance),
        connect_timeout=settings.SSH_CONNECT_TIMEOUT,
        keepalive=settings.SSH_KEEPALIVE,
        max_answer=settings.NODE_ANSWER_MAX_BYTES,
    )


def first_contact_key(instance):
    """The host key a box offers, learned without authenticating or running anything."""
    return scan_host_key(instance.host, instance.port, settings.SSH_CONNECT_TIMEOUT)


WRAPPER_FILE = Path(__file__).parent / "node" / "remotegpu_wrapper.py"


def wrapper_argv(tools: str, subcommand: str, *args: str, node_limit: int | None = None) -> list[str]:
    """The wrapper's command line on the node; node_limit: seconds after which `timeout` ends it there too."""
    # -I: the box's PYTHON* variables and user site cannot reach the wrapper (a PYTHONPATH with a
    # json.py would shadow ours); -S: no site-packages, which the stdlib-only wrapper never needs and
    # whose .pth files cost each start tens of ms (a third of a probe's CPU on the benchmark box).
    argv = [settings.NODE_PYTHON, "-I", "-S", f"{tools}/{wrapper_name()}", subcommand, *args]
    return ["timeout", "-k", "1", str(node_limit), *argv] if node_limit is not None else argv


def wrapper_name() -> str:
    # Versioned by content: a new wrapper is a new file; a live run's file is never rewritten.
    return f"wrapper-{hashlib.sha256(WRAPPER_FILE.read_bytes()).hexdigest()[:12]}.py"


def _check(result, what: str) -> None:
    if result.exit_code != 0:
        raise NodeError(f"{what} failed on the node (exit {result.exit_code}): {result.stderr.strip()[-400:]}")


class InstanceNode:
    """One connection to an instance: $HOME resolved once, layouts for any of its runs."""

    check = staticmethod(_check)

    def __init__(self, instance):
        self.instance = instance
        self.transport = transport_for(instance)

    def __enter__(self):
        self.transport.__enter__()
        self.home = self.transport.run_script('printf %s "$HOME"', timeout=settings.SSH_COMMAND_TIMEOUT).stdout
        return self

    def __exit__(self, *exc):
        self.transport.close()

    @property
    def tools(self) -> str:
        """The wrapper's directory under this instance's project root (instance-level calls)."""
        return NodeLayout(resolve_home(self.instance.data_root, self.home), self.instance.project.slug, "").tools

    def idle(self, root: str) -> list[dict]:
        """Processes working in or writing under root on the node (nothing: the box is idle there)."""
        self.install_wrapper(self.tools)
        return self.invoke(self.tools, "idle", root)["busy"]

    def clean_caches(self, paths: list[str]) -> dict:
        self.install_wrapper(self.tools)
        return self.invoke(self.tools, "clean-caches", request={"paths": paths}, timeout=300, bound=True)

    def remove_copy(self, path: str, root: str) -> dict:
        """Delete one copy of a sealed export on the box, strictly inside root (the wrapper refuses
        anything else): {"removed": whether it was there, "bytes": what it held}."""
        self.install_wrapper(self.tools)
        return self.invoke(self.tools, "remove-copy", request={"path": path, "root": root}, timeout=300, bound=True)

    def layout_of(self, run) -> NodeLayout:
        node_source = resolve_home(run.node_source, self.home) if run.node_source else ""
        data_root = resolve_home(self.instance.data_root, self.home)
        return NodeLayout(data_root, run.project.slug, run.run_id, node_source)

    def invoke(self, tools: str, subcommand: str, *args: str, request=None, timeout=None, bound=False) -> dict:
        """Run one wrapper subcommand on the node: its answer, checked against the protocol, or NodeError.

        bound: a `timeout` on the node as well, so a call we stopped waiting for stops there too.
        """
        timeout = timeout or settings.SSH_COMMAND_TIMEOUT
        argv = wrapper_argv(tools, subcommand, *args, node_limit=max(1, int(timeout) - 2) if bound else None)
        stdin = json.dumps(request).encode() if request is not None else None
        try:
            result = self.transport.run(argv, timeout=timeout, stdin=stdin)
        except AnswerTooLarge as exc:  # the box answered, far more than any answer is: a node error
            raise NodeError(f"{subcommand}: {exc}") from None
        answer = parse_answer(subcommand, result.exit_code, result.stdout, result.stderr)
        return known_status(answer) if subcommand == "status" else answer

    def probe(self, runs, stream=None) -> dict:
        """Every given run in one round-trip; a malformed run status becomes {"error": why}.

        stream: the runs' push stream (runs/push.py), asked first: the probe is then one line on a
        channel already open, with no process started and nothing exec'd on the box. Without one,
        or when it cannot answer, the wrapper's `probe` command, exactly as before."""
        tools, items = self._attempts(runs)
        for item, run in zip(items, runs, strict=True):
            item.update(log_offset=run.log_offset, csv_offset=run.csv_offset)
        request = {"runs": items}
        answer = stream.ask(request, settings.WATCH_PROBE_TIMEOUT / 2) if stream is not None else None
        if answer is not None:
            answer = check_answer("probe", answer)
        else:
            answer = self.invoke(tools, "probe", request=request, timeout=settings.WATCH_PROBE_TIMEOUT, bound=True)
        statuses = {}
        for run_id, status in answer["runs"].items():
            problem = status_problem(status)
            statuses[run_id] = {"error": problem} if problem else known_status(status)
        return {**answer, "runs": statuses}

    def follow(self, runs, offsets: dict[str, int], lifetime: float):
        """The push stream of these runs (one channel), each from its offset: a LineFeed of follow events."""
        tools, items = self._attempts(runs)
        for item, run in zip(items, runs, strict=True):
            item["log_offset"] = offsets.get(run.run_id, run.log_offset)
        request = {"runs": items, "lifetime": lifetime, "poll": settings.WATCH_PUSH_POLL}
        argv = wrapper_argv(tools, "follow", node_limit=int(lifetime) + 5)
        return self.transport.follow(argv, json.dumps(request).encode())

    def _attempts(self, runs) -> tuple[str, list[dict]]:
        """The tools directory and, per run, its current attempt's spec: what probe and follow ask about."""
        layouts = [self.layout_of(run) for run in runs]
        return layouts[0].tools, [
            {"spec": layout.spec(f"attempt-{run.attempt}")} for run, layout in zip(runs, layouts, strict=True)
        ]

    def install_wrapper(self, tools: str) -> str:
        """The current wrapper under tools/, uploaded once (staged under a unique name, then renamed)."""
        path = f"{tools}/{wrapper_name()}"
        if self.transport.stat(path) is None:
            self.check(self.transport.run(["mkdir", "-p", tools], timeout=settings.SSH_COMMAND_TIMEOUT), "mkdir")
            # A unique staging name: several runs may prepare the same project root at once.
            staging = f"{path}.upload-{uuid.uuid4().hex}"
            self.transport.upload(WRAPPER_FILE, staging)
            self.check(self.transport.run(["mv", "-f", staging, path], timeout=30), "install wrapper")
        return path

    def rehash(self, run, copies: list[dict]) -> list[dict]:
        """Re-hash copies on this node against control-side rosters: [{"root", "files"}] in, one answer each."""
        tools = self.layout_of(run).tools
        self.install_wrapper(tools)
        request = {"copies": copies}
        answers = self.invoke(tools, "rehash", request=request, timeout=settings.CUSTODY_MIRROR_TIMEOUT, bound=True)[
            "copies"
        ]
        if len(answers) != len(copies) or not all(isinstance(answer, dict) for answer in answers):
            raise NodeError("rehash answered for a different number of copies")
        return answers

    def close_active(self, run, reason: str) -> dict:
        """Move the run's active/ into quarantine/<run-id>--closed-<time> on the node, with the reason."""
        layout = self.layout_of(run)
        self.install_wrapper(layout.tools)
        target = posixpath.join(layout.quarantine_base, f"{run.run_id}--closed-{int(time.time())}")
        request = {"active": layout.active, "quarantine": target, "reason": reason}
        return self.invoke(layout.tools, "close-active", request=request)

    def stop(self, run, by: str) -> dict:
        """A person's stop of the run's current attempt: SIGTERM, SIGKILL after the grace (the wrapper's)."""
        layout = self.layout_of(run)
        self.install_wrapper(layout.tools)  # this control host's wrapper, though another version launched it
        request = {"by": by, "grace_seconds": settings.RUN_STOP_GRACE_SECONDS}
        return self.invoke(layout.tools, "stop", layout.spec(f"attempt-{run.attempt}"), request=request)

    def abandon(self, run) -> dict:
        layout = self.layout_of(run)
        return self.invoke(layout.tools, "abandon", layout.spec(f"attempt-{run.attempt}"))
