"""The one node client: open a transport to an instance (LocalTransport for the local profile,
SSHTransport otherwise) and call the node wrapper on it through one method, `NodeClient.invoke`.

`NodeClient` is the box level (idle scans, caches, any run's layout); `RunNode` the run level: one
run's layout, specs, launch, roster and mirror. What a run ships (its source tarball) is made by
the caller (runs/shipping.py); the client only moves it.
"""

import json
import posixpath
import re
import shlex
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings

from fleet import slurm_jobs
from fleet.control_host import local_node_problem
from fleet.credentials import ssh_auth
from fleet.tier_mount import tier_root_problem
from node import slurm
from node.build import wrapper_file, wrapper_name
from node.protocol import NodeError, check_answer, known_status, parse_answer, status_problem
from node.transport import (
    AnswerTooLarge,
    CredentialError,
    LocalTransport,
    SSHTransport,
    Transport,
    scan_host_key,
)
from node.transport.base import shell_path
from platforms.layout import NodeLayout, is_hardware, resolve_home
from wrapper.contract import Spec

SELECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")  # a file name in _trust/selections/


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


def wrapper_argv(
    tools: str, subcommand: str, *args: str, node_limit: int | None = None, python: str | None = None
) -> list[str]:
    """The wrapper's command line on the node; node_limit: seconds after which `timeout` ends it there too;
    python: the box's interpreter for the wrapper (its hooks'), NODE_PYTHON by default."""
    # -I: the box's PYTHON* variables and user site cannot reach the wrapper (a PYTHONPATH with a
    # json.py would shadow ours); -S: no site-packages, which the stdlib-only wrapper never needs and
    # whose .pth files cost each start tens of ms (a third of a probe's CPU on the benchmark box).
    argv = [python or settings.NODE_PYTHON, "-I", "-S", f"{tools}/{wrapper_name()}", subcommand, *args]
    return ["timeout", "-k", "1", str(node_limit), *argv] if node_limit is not None else argv


def _check(result, what: str) -> None:
    if result.exit_code != 0:
        raise NodeError(f"{what} failed on the node (exit {result.exit_code}): {result.stderr.strip()[-400:]}")


class NodeClient:
    """One connection to an instance: $HOME resolved once, layouts for any of its runs."""

    check = staticmethod(_check)

    def __init__(self, instance):
        self.instance = instance
        self.transport = transport_for(instance)
        self.python = None  # the hooks' interpreter, once the box said it has it (__enter__)

    def __enter__(self):
        self.transport.__enter__()
        self.hooks = self.instance.effective_hooks
        # $HOME, and whether the hooks' interpreter is there, in the one round-trip a connection starts with.
        wanted = self.hooks["interpreter"]
        script = 'printf "%s\\n" "$HOME"'
        if wanted:
            script += f"; if [ -x {shell_path(wanted)} ]; then printf yes; fi"
        answer = self.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT).stdout
        self.home, _, found = answer.partition("\n")
        # Measured, not declared: an interpreter the box does not have is never the wrapper's (the
        # preflight reports it); the run's own default follows the same answer on the box.
        self.python = resolve_home(wanted, self.home) if wanted and found.strip() == "yes" else None
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

    def upload_bytes(self, data: bytes, path: str) -> None:
        """data as the file at path on the node (the transports upload files: a private temporary one)."""
        with tempfile.NamedTemporaryFile() as handle:
            handle.write(data)
            handle.flush()
            self.transport.upload(Path(handle.name), path)

    def read_json(self, path: str, limit: int):
        """A small JSON file on the node, read bounded; None when it is missing or is not JSON (untrusted)."""
        result = self.transport.run(["head", "-c", str(limit), path], timeout=settings.SSH_COMMAND_TIMEOUT)
        try:
            return json.loads(result.stdout) if result.exit_code == 0 else None
        except ValueError:
            return None

    def layout_of(self, run) -> NodeLayout:
        node_source = resolve_home(run.node_source, self.home) if run.node_source else ""
        data_root = resolve_home(self.instance.data_root, self.home)
        hot_root = resolve_home(self.instance.hot_root, self.home)
        return NodeLayout(data_root, run.project.slug, run.run_id, node_source, is_hardware(run), hot_root)

    def invoke(self, tools: str, subcommand: str, *args: str, request=None, timeout=None, bound=False) -> dict:
        """Run one wrapper subcommand on the node: its answer, checked against the protocol, or NodeError.

        bound: a `timeout` on the node as well, so a call we stopped waiting for stops there too.
        """
        timeout = timeout or settings.SSH_COMMAND_TIMEOUT
        limit = max(1, int(timeout) - 2) if bound else None
        argv = wrapper_argv(tools, subcommand, *args, node_limit=limit, python=self.python)
        stdin = json.dumps(request).encode() if request is not None else None
        try:
            result = self.transport.run(argv, timeout=timeout, stdin=stdin)
        except AnswerTooLarge as exc:  # the box answered, far more than any answer is: a node error
            raise NodeError(f"{subcommand}: {exc}") from None
        answer = parse_answer(subcommand, result.exit_code, result.stdout, result.stderr)
        return known_status(answer) if subcommand == "status" else answer

    def probe(self, runs, stream=None) -> dict:
        """Every given run in one round-trip; a malformed run status becomes {"error": why}.

        stream: the runs' push stream (watching/push.py), asked first: the probe is then one line on a
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
        if any(run.slurm_job for run in runs):  # a cluster's jobs: whether they live is the scheduler's word
            statuses = slurm_jobs.with_scheduler(self.transport, runs, statuses)
        return {**answer, "runs": statuses}

    def streamed(self, tools: str, subcommand: str, chunks, timeout: float) -> dict:
        """A wrapper subcommand fed a byte stream on stdin (chunks, sent while it answers): its answer."""
        argv = wrapper_argv(tools, subcommand, node_limit=max(1, int(timeout) - 2), python=self.python)
        result = self.transport.run(argv, timeout=timeout, stdin=chunks)
        return parse_answer(subcommand, result.exit_code, result.stdout, result.stderr)

    def lines_of(self, tools: str, subcommand: str, request: dict, lifetime: float):
        """A wrapper subcommand that reports as it goes: a LineFeed of its lines, its request on stdin."""
        argv = wrapper_argv(tools, subcommand, node_limit=int(lifetime), python=self.python)
        return self.transport.follow(argv, json.dumps(request).encode())

    def follow(self, runs, offsets: dict[str, int], lifetime: float):
        """The push stream of these runs (one channel), each from its offset: a LineFeed of follow events."""
        tools, items = self._attempts(runs)
        for item, run in zip(items, runs, strict=True):
            item["log_offset"] = offsets.get(run.run_id, run.log_offset)
        request = {"runs": items, "lifetime": lifetime, "poll": settings.WATCH_PUSH_POLL}
        argv = wrapper_argv(tools, "follow", node_limit=int(lifetime) + 5, python=self.python)
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
            self.transport.upload(wrapper_file(), staging)
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
        """A person's stop of the run's current attempt: SIGTERM, SIGKILL after the grace (the wrapper's).
        A Slurm job: the stop's marker on shared storage, then scancel (its TERM reaches the wrapper)."""
        layout = self.layout_of(run)
        self.install_wrapper(layout.tools)  # this control host's wrapper, though another version launched it
        request = {"by": by, "grace_seconds": settings.RUN_STOP_GRACE_SECONDS}
        if run.slurm_job:
            request["signal"] = False
        answer = self.invoke(layout.tools, "stop", layout.spec(f"attempt-{run.attempt}"), request=request)
        if run.slurm_job:
            slurm_jobs.cancel(self.transport, run.slurm_job)
            answer = {**answer, "job": run.slurm_job, "cancelled": True}
        return answer

    def abandon(self, run) -> dict:
        """Quarantine a dead attempt on the node; a Slurm job's on the scheduler's final word."""
        layout = self.layout_of(run)
        seen = (run.last_status or {}).get("scheduler") or {} if run.slurm_job else {}
        request = {"scheduler": seen.get("said")} if seen.get("final") else {}
        return self.invoke(layout.tools, "abandon", layout.spec(f"attempt-{run.attempt}"), request=request)


LAUNCH_MARKER_LIMIT = 16384  # a launch marker is a few hundred bytes; more is not one


class RunNode(NodeClient):
    """One short connection to a run's node: open, do a few things, close."""

    def __init__(self, run, env=None, dataset_files=None, peer=None, builder=None):
        """peer: one of the run's RunPeer rows: its box, not the run's own (a run over several boxes).
        builder: what tells the box about an attempt (runs/box_spec.py, where the run lives: its spec_for and
        restore_for); runs.box_spec.run_node passes it."""
        super().__init__(peer.instance if peer is not None else run.instance)
        self.run, self.peer, self.builder = run, peer, builder
        self.env = env or {}  # what the caller adds to the command's environment (its checkpoint cadence)
        # SHA-256 → bytes of every file of the run's datasets: sealing refuses an export holding one.
        self.dataset_files = dataset_files or {}

    def __enter__(self):
        super().__enter__()
        self.layout = self.layout_of(self.run)
        return self

    @property
    def wrapper_path(self) -> str:
        return f"{self.layout.tools}/{wrapper_name()}"

    def prepare(self) -> None:
        self.check_tier_root()
        layout = self.layout
        dirs = [layout.active, layout.tools, layout.quarantine_base, f"{layout.run_root}/export/.partial"]
        self.check(self.transport.run(["mkdir", "-p", *dirs], timeout=settings.SSH_COMMAND_TIMEOUT), "mkdir")
        self.install_wrapper(layout.tools)

    def check_tier_root(self) -> None:
        """The data root's tier, where it is a disk of its own, measured mounted there (fleet/tier_mount.py)."""
        problem = tier_root_problem(self.transport, self.instance, self.home)
        if problem:
            raise NodeError(problem)

    def has_source(self) -> bool:
        """The run's src/ is on the node already (shipped by an earlier attempt)."""
        return self.transport.stat(self.layout.src) is not None

    def upload_source(self, tarball: bytes) -> None:
        """Upload a source tarball and unpack it into the run's src/ (the wrapper's `extract`)."""
        self.upload_bytes(tarball, f"{self.layout.active}/src.tar")
        self.call("extract", self.write_spec("extract", self.spec(0)))

    def spec(self, attempt: int) -> Spec:
        """What this attempt is told (the run's builder makes it: runs/box_spec.py)."""
        if self.builder is None:
            raise NodeError("this node client was made without the run's spec builder (runs.box_spec.run_node)")
        return self.builder.spec_for(self, attempt)

    def ckpt_target(self) -> str | None:
        """Where this run's checkpoints are mirrored on the box's durable tier, if it has one."""
        root = self.durable_root()
        return posixpath.join(root, "remotegpu-ckpt", self.run.project.slug, self.run.run_id, "ckpt") if root else None

    def restore_for(self, attempt: int) -> dict:
        return self.builder.restore_for(self, attempt)

    def upload_restore(self, attempt: int, local_dir: Path) -> int:
        """The control host's checkpoint copies an attempt restores, uploaded into the box's inbox (the
        wrapper hashes each against its recorded SHA-256 at the restore): bytes sent."""
        restore = self.restore_for(attempt)
        if not restore.get("consume") or not restore["files"]:
            return 0
        mkdir = self.transport.run(["mkdir", "-p", restore["from"]], timeout=settings.SSH_COMMAND_TIMEOUT)
        self.check(mkdir, "mkdir")
        sent = 0
        for item in restore["files"]:
            self.transport.upload(local_dir / item["file"], f"{restore['from']}/{item['file']}")
            sent += int(item["bytes"])
        return sent

    def put_secrets(self, spec_path: str, values: dict[str, str]) -> None:
        """The secrets of the attempt (or smoke) whose spec is at spec_path, on the command's stdin: a 0600
        file its wrapper reads once."""
        if values:
            self.invoke(self.layout.tools, "put-secrets", spec_path, request={"values": values})

    def write_spec(self, name: str, spec: Spec) -> str:
        path = self.layout.spec(name)
        self.upload_bytes(spec.to_json().encode(), path)
        return path

    def call(self, subcommand: str, spec_path: str, timeout: float | None = None) -> dict:
        return self.invoke(self.layout.tools, subcommand, spec_path, timeout=timeout)

    def selection_manifest(self, name: str, limit: int) -> bytes | None:
        """The project's selection manifest `_trust/selections/<name>.json` on the box, at most limit + 1
        bytes of it (so a larger one is seen as larger); None where it is not a file there."""
        if not SELECTION_NAME.match(name):
            raise ValueError(f"not a selection id: {name[:40]!r}")
        path = posixpath.join(self.layout.run_root, "_trust", "selections", f"{name}.json")
        found = self.transport.stat(path)
        if found is None or found.is_dir:
            return None
        with self.transport.reader(path) as handle:
            return handle.read(limit + 1)

    def roster(self) -> dict:
        """The node's roster of this run's sealed export (validated by custody.roster.parse_roster)."""
        spec_path = self.attempt_spec(max(self.run.attempt, 1))
        return self.call("roster", spec_path, timeout=settings.AUDIT_TIMEOUT)

    def boot_marker(self) -> str:
        return posixpath.join(posixpath.dirname(self.layout.run_root), ".remotegpu-boot")

    def durable_root(self) -> str | None:
        """This box's durable root as the node spells it, if it has one (the operator's, or the platform's)."""
        root = self.instance.mirror_root or self.instance.profile.durable_root
        return resolve_home(root, self.home) if root else None

    def mirror_target(self) -> str | None:
        """Where this run's sealed export is mirrored on the node's durable tier, if it has one."""
        root = self.durable_root()
        if not root:
            return None
        return posixpath.join(root, "remotegpu-custody", self.run.project.slug, self.run.run_id)

    def mirror(self, target: str, root: str | None = None) -> dict:
        """Node → durable tier, hashed against the sealed roster on the node itself; the durable root
        (this box's, unless given) is measured there first: it must exist and be another disk."""
        root = root or self.durable_root()
        if not root:
            raise NodeError("mirror: this box has no durable root")
        spec_path = self.attempt_spec(max(self.run.attempt, 1))
        answer = self.invoke(
            self.layout.tools, "mirror", spec_path, target, root, timeout=settings.CUSTODY_MIRROR_TIMEOUT
        )
        if not answer["verified"]:
            raise NodeError(f"the existing mirror at {target} differs from the sealed roster")
        return answer

    def attempt_spec(self, attempt: int) -> str:
        """The attempt's spec on the node, uploaded once; status checks reuse it."""
        path = self.layout.spec(f"attempt-{attempt}")
        if self.transport.stat(path) is None:
            self.write_spec(f"attempt-{attempt}", self.spec(attempt))
        return path

    def launch(self, attempt: int, use_tmux: bool) -> tuple[str, str]:
        """Start the attempt detached; returns (detach primitive, the command as launched). Both are
        written on the node first, so a redelivered launch that adopts the attempt reads them back."""
        spec_path = self.attempt_spec(attempt)
        inner = [self.python or settings.NODE_PYTHON, self.wrapper_path, "run", spec_path]
        if use_tmux:
            # A tmux server of its own (-L, named as the session): on the box's default server, shared with
            # every other run and every person there, a launch while that server was exiting (its last
            # session just ended) failed with "server exited unexpectedly", and one `tmux kill-server`
            # ended every run. Watch it with `tmux -L <session> attach`.
            session = f"rgpu-{self.run.run_id}-{attempt}"
            argv = ["tmux", "-L", session, "new-session", "-d", "-s", session, shlex.join(inner)]
            self._write_launch_marker(attempt, "tmux", shlex.join(argv))
            self.check(self.transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT), "tmux launch")
            return "tmux", shlex.join(argv)
        log = f"{self.layout.active}/launch-{attempt}.log"
        # The whole background list redirected, not only its last command: `cd / && setsid nohup … &` left
        # the list's subshell holding the SSH session's output until the run ended, so the launch waited
        # out SSH_COMMAND_TIMEOUT and was marked failed while the run went on (measured: 20.3 s for a 20 s
        # command; 0.28 s like this).
        script = f"{{ cd / && exec setsid nohup {shlex.join(inner)}; }} </dev/null >{shlex.quote(log)} 2>&1 &"
        self._write_launch_marker(attempt, "nohup", script)
        self.check(self.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT), "nohup launch")
        return "nohup", script

    def launch_job(self, attempt: int) -> tuple[str, str, str]:
        """Submit the attempt as a Slurm job from the login node: (detach, command, job id), the job's id
        written on the node with how it was launched (a redelivered launch reads it back)."""
        spec_path = self.attempt_spec(attempt)
        inner = [self.python or settings.NODE_PYTHON, self.wrapper_path, "run", spec_path]
        detach, command, job = slurm_jobs.submit(self, attempt, inner)
        self._write_launch_marker(attempt, detach, command, job)
        return detach, command, job

    def launch_array(self, cells, name: str, at_once: int) -> tuple[str, str]:
        """A sweep's cells (each with its attempt's spec on the login node) as one Slurm job array: (command,
        the array's id). Each cell's job, "<id>_<cell>", is written in its own launch marker, as a single
        job's is, so a redelivered launch of the cell reads it back."""
        python = self.python or settings.NODE_PYTHON
        tasks = []
        for cell in cells:
            layout = self.layout_of(cell)
            argv = [python, self.wrapper_path, "run", layout.spec(f"attempt-{cell.attempt}")]
            tasks.append(slurm.ArrayTask(cell.cell, layout.active, argv))
        script_path = f"{self.layout.active}/{name}.sbatch"
        command, job = slurm_jobs.submit_array(self, name, script_path, tasks, at_once)
        for cell in cells:
            self._write_launch_marker(cell.attempt, "sbatch", command, f"{job}_{cell.cell}", run=cell)
        return command, job

    def _launch_marker(self, attempt: int, run=None) -> str:
        return f"{self.layout_of(run).active if run else self.layout.active}/launch-{attempt}.json"

    def _write_launch_marker(self, attempt: int, detach: str, command: str, job: str = "", run=None) -> None:
        marker = {"detach": detach, "command": command, **({"job": job} if job else {})}
        self.upload_bytes(json.dumps(marker).encode(), self._launch_marker(attempt, run))

    def launched_as(self, attempt: int) -> tuple[str, str, str] | None:
        """(detach, command, Slurm job or "") of an attempt as its launch wrote them on the node; None when the
        marker is missing or is not what a launch writes (the box is untrusted: bounded, typed, or nothing)."""
        marker = self.read_json(self._launch_marker(attempt), LAUNCH_MARKER_LIMIT)
        if not isinstance(marker, dict) or marker.get("detach") not in ("tmux", "nohup", "sbatch"):
            return None
        command, job = marker.get("command"), marker.get("job", "")
        job = job if isinstance(job, str) and slurm.JOB.fullmatch(job) else ""
        return (marker["detach"], command, job) if isinstance(command, str) and command else None
