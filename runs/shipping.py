"""What a run ships to its node: its source (a directory or a git commit), with a sweep cell's config,
checked before a byte moves: shell scripts with CRLF line endings are refused (or converted when the run
says so), and the tarball is within SOURCE_MAX_BYTES; and its datasets, staged into the box's cache."""

import time

from django.conf import settings

from datasets.models import Dataset
from datasets.staging import stage
from node.protocol import NodeError
from runs import sources, sweeps
from runs.budget import required_bytes
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


DATASET_FILES_LIMIT = 200_000  # entries handed to the box's sealing check (about 16 MB of spec at most)


def dataset_files(run) -> dict[str, int]:
    """SHA-256 → bytes of every file of the run's datasets: an export holding one holds dataset bytes."""
    if not run.datasets:
        return {}
    found = {}
    for dataset in Dataset.objects.filter(project_id=run.project_id, name__in=run.datasets).only("roster"):
        for entry in dataset.roster:
            if len(found) < DATASET_FILES_LIMIT and entry.get("bytes"):  # an empty file is in every export
                found[entry["sha256"]] = entry["bytes"]
    return found


def stage_datasets(node, record_progress) -> tuple[list[dict], list[str]]:
    """Stage each of the run's datasets onto its node (a RunNode): what each became there, and the problems.

    record_progress(staging) is called at most once a second with the bytes moved so far."""
    run = node.run
    known = {d.name: d for d in Dataset.objects.filter(project_id=run.project_id, name__in=run.datasets)}
    staged, problems = [], []
    for name in run.datasets:
        dataset = known.get(name)
        if dataset is None or not dataset.roster_sha256:
            problems.append(f"Dataset {name} is not registered and ready in this project")
            continue
        progress = _throttled(record_progress, name, dataset.total_bytes)
        try:
            done = stage(node, dataset, progress, reserve=_reserve(node))
        except NodeError as exc:
            problems.append(f"Dataset {name}: {exc}")
            continue
        staged.append({"name": name, "roster_sha256": dataset.roster_sha256, **done})
    return staged, problems


def _reserve(node) -> int:
    """What the run needs free on the cache's disk after its datasets: its storage budget's bytes when the
    cache shares the data root's disk (no fast local disk of its own), else nothing."""
    if node.instance.hot_root:
        return 0
    return required_bytes(node.run)


def _throttled(record_progress, name: str, total: int):
    last = [0.0]

    def progress(moved: int, files: int) -> None:
        if time.monotonic() - last[0] >= 1.0:
            last[0] = time.monotonic()
            record_progress({"dataset": name, "bytes_done": moved, "total_bytes": total, "files_done": files})

    return progress
