"""What a run ships to its node: its source (a directory or a git commit), with a sweep cell's config,
checked before a byte moves: shell scripts with CRLF line endings are refused (or converted when the run
says so), and the tarball is within SOURCE_MAX_BYTES."""

from django.conf import settings

from runs import sources, sweeps
from runs.models import SourceKind


def source_tarball(run) -> tuple[bytes, str | None]:
    """The run's source as a tarball, and the git commit it resolved to (None for a directory)."""
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
    return checked(run, tarball), commit


def checked(run, tarball: bytes) -> bytes:
    """The tarball as it may be shipped; SourceError naming the first file or limit that refuses it."""
    crlf = sources.crlf_scripts(tarball)
    if crlf and not run.convert_crlf:
        raise sources.SourceError(
            f"{crlf[0]} has Windows (CRLF) line endings: bash would read a carriage return into every "
            "command. Convert it (dos2unix), or let the run convert shell scripts' line endings."
        )
    if crlf:
        tarball = sources.with_unix_line_endings(tarball, crlf)
    problem = sources.shipped_problem(tarball, settings.SOURCE_MAX_BYTES)
    if problem:
        raise sources.SourceError(problem)
    return tarball


def ship_source(node) -> str | None:
    """Upload and unpack the run's source on its node (a RunNode) unless it is there or lives there;
    the resolved git commit for git sources."""
    run = node.run
    if run.source_kind == SourceKind.NODE_PATH or node.has_source():
        return run.resolved_commit or None
    tarball, commit = source_tarball(run)
    node.upload_source(tarball)
    return commit
