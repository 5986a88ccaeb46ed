"""What the control side does on a run's node, through the transport and our node wrapper."""

import json
import posixpath
import shlex
import tempfile
from pathlib import Path

from django.conf import settings

from profiles.layout import resolve_home
from profiles.nodes import InstanceNode, wrapper_name
from profiles.protocol import NodeError
from runs import sources, sweeps
from runs.models import SourceKind

LAUNCH_MARKER_LIMIT = 16384  # a launch marker is a few hundred bytes; more is not one


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
        if run.config_overrides:  # a sweep cell or a run "like" another: its merged config, its own hash
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
            "stop_grace_seconds": settings.RUN_STOP_GRACE_SECONDS,
            # Rewritten by the platform's start hook, so a container restart is seen as one.
            "boot_marker": posixpath.join(posixpath.dirname(layout.run_root), ".remotegpu-boot"),
            "smoke_timeout": settings.SMOKE_TIMEOUT,
            # A declared tier is measured: preflight reports the mount of its path beside the data root's.
            "data_tier_path": self._declared_tier_path(),
        }

    def _declared_tier_path(self) -> str | None:
        tier = self.instance.profile.tier_named(self.instance.data_tier) if self.instance.data_tier else None
        return resolve_home(tier["path"], self.home) if tier else None

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
        inner = [settings.NODE_PYTHON, self.wrapper_path, "run", spec_path]
        if use_tmux:
            session = f"rgpu-{self.run.run_id}-{attempt}"
            argv = ["tmux", "new-session", "-d", "-s", session, shlex.join(inner)]
            self._write_launch_marker(attempt, "tmux", shlex.join(argv))
            self.check(self.transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT), "tmux launch")
            return "tmux", shlex.join(argv)
        log = f"{self.layout.active}/launch-{attempt}.log"
        script = f"cd / && setsid nohup {shlex.join(inner)} </dev/null >{shlex.quote(log)} 2>&1 &"
        self._write_launch_marker(attempt, "nohup", script)
        self.check(self.transport.run_script(script, timeout=settings.SSH_COMMAND_TIMEOUT), "nohup launch")
        return "nohup", script

    def _launch_marker(self, attempt: int) -> str:
        return f"{self.layout.active}/launch-{attempt}.json"

    def _write_launch_marker(self, attempt: int, detach: str, command: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
            json.dump({"detach": detach, "command": command}, handle)
            handle.flush()
            self.transport.upload(Path(handle.name), self._launch_marker(attempt))

    def launched_as(self, attempt: int) -> tuple[str, str] | None:
        """(detach, command) of an attempt as its launch wrote them on the node; None when the marker is
        missing or is not what a launch writes (the box is untrusted: bounded, typed, or nothing)."""
        argv = ["head", "-c", str(LAUNCH_MARKER_LIMIT), self._launch_marker(attempt)]
        result = self.transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        try:
            marker = json.loads(result.stdout) if result.exit_code == 0 else None
        except ValueError:
            return None
        if not isinstance(marker, dict) or marker.get("detach") not in ("tmux", "nohup"):
            return None
        command = marker.get("command")
        return (marker["detach"], command) if isinstance(command, str) and command else None
