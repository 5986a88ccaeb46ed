"""What the control side does on a run's node, through the transport and our node wrapper."""

import hashlib
import json
import posixpath
import shlex
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings

from profiles.nodes import transport_for
from runs import sources, sweeps
from runs.layout import NodeLayout, resolve_home
from runs.models import SourceKind
from runs.protocol import NodeError, parse_answer, status_problem

WRAPPER_FILE = Path(__file__).parent / "node" / "remotegpu_wrapper.py"


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

    def layout_of(self, run) -> NodeLayout:
        node_source = resolve_home(run.source_path, self.home) if run.source_kind == SourceKind.NODE_PATH else ""
        data_root = resolve_home(self.instance.data_root, self.home)
        return NodeLayout(data_root, run.project.slug, run.run_id, node_source)

    def invoke(self, tools: str, subcommand: str, *args: str, request=None, timeout=None, bound=False) -> dict:
        """Run one wrapper subcommand on the node: its answer, checked against the protocol, or NodeError.

        bound: a `timeout` on the node as well, so a call we stopped waiting for stops there too.
        """
        timeout = timeout or settings.SSH_COMMAND_TIMEOUT
        argv = [settings.NODE_PYTHON, f"{tools}/{wrapper_name()}", subcommand, *args]
        if bound:
            argv = ["timeout", "-k", "1", str(max(1, int(timeout) - 2)), *argv]
        stdin = json.dumps(request).encode() if request is not None else None
        result = self.transport.run(argv, timeout=timeout, stdin=stdin)
        return parse_answer(subcommand, result.exit_code, result.stdout, result.stderr)

    def probe(self, runs) -> dict:
        """Every given run in one round-trip; a malformed run status becomes {"error": why}."""
        layouts = [self.layout_of(run) for run in runs]
        request = {
            "runs": [
                {
                    "spec": layout.spec(f"attempt-{run.attempt}"),
                    "log_offset": run.log_offset,
                    "csv_offset": run.csv_offset,
                }
                for run, layout in zip(runs, layouts, strict=True)
            ]
        }
        answer = self.invoke(
            layouts[0].tools, "probe", request=request, timeout=settings.WATCH_PROBE_TIMEOUT, bound=True
        )
        statuses = {}
        for run_id, status in answer["runs"].items():
            problem = status_problem(status)
            statuses[run_id] = {"error": problem} if problem else status
        return {**answer, "runs": statuses}

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

    def abandon(self, run) -> dict:
        layout = self.layout_of(run)
        return self.invoke(layout.tools, "abandon", layout.spec(f"attempt-{run.attempt}"))


class NodeSession(InstanceNode):
    """One short connection to a run's node: open, do a few things, close."""

    def __init__(self, run):
        super().__init__(run.instance)
        self.run = run

    def __enter__(self):
        super().__enter__()
        self.layout = self.layout_of(self.run)
        return self

    @property
    def wrapper_path(self) -> str:
        return f"{self.layout.tools}/{wrapper_name()}"

    def prepare(self) -> None:
        layout = self.layout
        dirs = [layout.active, layout.tools, layout.quarantine_base, f"{layout.run_root}/export/.partial"]
        self.check(self.transport.run(["mkdir", "-p", *dirs], timeout=settings.SSH_COMMAND_TIMEOUT), "mkdir")
        self.install_wrapper(layout.tools)

    def ship_source(self) -> str | None:
        """Upload and unpack the source; returns the resolved git commit for git sources."""
        run = self.run
        if run.source_kind == SourceKind.NODE_PATH or self.transport.stat(self.layout.src) is not None:
            return run.resolved_commit or None
        root = sources.confined_source(run.source_path)
        commit = None
        if run.source_kind == SourceKind.GIT:
            commit = sources.resolve_commit(root, run.source_commit or "HEAD")
            tarball = sources.git_tarball(root, commit)
        else:
            tarball = sources.directory_tarball(root)
        if run.config_overrides:  # a sweep cell: its merged config, so its config hash is its own
            base = (root / run.config_path).read_text()
            merged = sweeps.merged_config(base, run.config_overrides).encode()
            tarball = sources.replace_member(tarball, run.config_path, merged)
        with tempfile.NamedTemporaryFile(suffix=".tar") as handle:
            handle.write(tarball)
            handle.flush()
            self.transport.upload(Path(handle.name), f"{self.layout.active}/src.tar")
        self.call("extract", self.write_spec("extract", self.spec(0)))
        return commit

    def spec(self, attempt: int) -> dict:
        run, layout = self.run, self.layout
        inputs = [["config", layout.under_src(run.config_path)]]
        inputs += [["data", resolve_home(path, self.home)] for path in run.data_paths]
        manifest = resolve_home(run.manifest_path, self.home) if run.manifest_path else None
        if manifest:
            inputs.append(["manifest", manifest])
        return {
            **layout.as_dict(),
            "run_id": run.run_id,
            "attempt": attempt,
            "argv": run.command,
            "cwd": layout.src,
            "env": {},
            "gpus": run.gpus,
            "environment": resolve_home(run.environment, self.home) if run.environment else "",
            "inputs": inputs,
            "config": layout.under_src(run.config_path),
            "manifest": manifest,
            "heartbeat_seconds": settings.RUN_HEARTBEAT_SECONDS,
            # Rewritten by the platform's start hook, so a container restart is seen as one.
            "boot_marker": posixpath.join(posixpath.dirname(layout.run_root), ".remotegpu-boot"),
            "smoke_timeout": settings.SMOKE_TIMEOUT,
        }

    def write_spec(self, name: str, spec: dict) -> str:
        path = self.layout.spec(name)
        with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
            json.dump(spec, handle)
            handle.flush()
            self.transport.upload(Path(handle.name), path)
        return path

    def call(self, subcommand: str, spec_path: str, timeout: float | None = None) -> dict:
        return self.invoke(self.layout.tools, subcommand, spec_path, timeout=timeout)

    def roster(self) -> dict:
        """The node's roster of this run's sealed export (validated by custody.roster.parse_roster)."""
        spec_path = self.attempt_spec(max(self.run.attempt, 1))
        return self.call("roster", spec_path, timeout=settings.AUDIT_TIMEOUT)

    def boot_marker(self) -> str:
        return self.spec(0)["boot_marker"]

    def install_start_hook(self, hook: str) -> None:
        """vast.ai runs its on-start script at every container start: make it rewrite our boot
        marker, so the watcher can tell a restarted container from a crashed run (idempotent)."""
        line = f'echo "$(date +%s%N)" > {shlex.quote(self.boot_marker())}  # remotegpu: container started'
        quoted_hook, quoted_line = shlex.quote(hook), shlex.quote(line)
        script = (
            f"touch {quoted_hook} && chmod +x {quoted_hook} && "
            f"(grep -qxF {quoted_line} {quoted_hook} || printf '%s\\n' {quoted_line} >> {quoted_hook})"
        )
        self.check(self.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT), "install start hook")

    def mirror_target(self) -> str | None:
        """Where this run's sealed export is mirrored on the node's durable tier, if it has one."""
        root = self.instance.mirror_root or self.instance.profile.durable_root
        if not root:
            return None
        return posixpath.join(
            resolve_home(root, self.home), "remotegpu-custody", self.run.project.slug, self.run.run_id
        )

    def mirror(self, target: str) -> dict:
        """Node → durable tier, hashed against the sealed roster on the node itself."""
        spec_path = self.attempt_spec(max(self.run.attempt, 1))
        answer = self.invoke(self.layout.tools, "mirror", spec_path, target, timeout=settings.CUSTODY_MIRROR_TIMEOUT)
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
        """Start the attempt detached; returns (detach primitive, the command as launched)."""
        spec_path = self.attempt_spec(attempt)
        inner = [settings.NODE_PYTHON, self.wrapper_path, "run", spec_path]
        if use_tmux:
            session = f"rgpu-{self.run.run_id}-{attempt}"
            argv = ["tmux", "new-session", "-d", "-s", session, shlex.join(inner)]
            self.check(self.transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT), "tmux launch")
            return "tmux", shlex.join(argv)
        log = f"{self.layout.active}/launch-{attempt}.log"
        script = f"cd / && setsid nohup {shlex.join(inner)} </dev/null >{shlex.quote(log)} 2>&1 &"
        self.check(self.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT), "nohup launch")
        return "nohup", script
