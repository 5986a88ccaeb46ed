"""Control-side sources: confine them to the allowed roots and pack them for shipping to the node."""

import io
import os
import subprocess
import tarfile
from pathlib import Path

from django.conf import settings

from core.paths import OutsideRoots, confined_directory

SKIP = {".git", "__pycache__", ".venv", "node_modules"}


class SourceError(Exception):
    pass


def confined_source(path: str) -> Path:
    """The resolved directory, if it lies inside one of settings.SOURCE_ROOTS."""
    try:
        return confined_directory(path, settings.SOURCE_ROOTS)
    except OutsideRoots as exc:
        raise SourceError(str(exc).replace("allowed roots", "allowed source roots")) from None


def resolve_commit(repo: Path, revision: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        raise SourceError(f"{revision!r} is not a commit in {repo}.")
    return result.stdout.strip()


def git_tarball(repo: Path, commit: str) -> bytes:
    command = ["git", "-C", str(repo), "archive", "--format=tar", commit]
    result = subprocess.run(command, capture_output=True, timeout=300)
    if result.returncode != 0:
        raise SourceError(f"git archive failed: {result.stderr.decode(errors='replace')[:300]}")
    return result.stdout


def directory_tarball(root: Path) -> bytes:
    """Regular files and directories only: links could point outside the source root."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP and not os.path.islink(os.path.join(directory, d)))
            for name in sorted(files):
                full = Path(directory) / name
                if full.is_symlink() or not full.is_file():
                    continue
                archive.add(full, arcname=str(full.relative_to(root)), recursive=False)
    return buffer.getvalue()


def replace_member(tarball: bytes, name: str, content: bytes) -> bytes:
    """The same tarball with one file's content replaced (or added): a sweep cell's merged config."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tarball)) as source, tarfile.open(fileobj=buffer, mode="w") as archive:
        for member in source.getmembers():
            if member.name != name:
                archive.addfile(member, source.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(content), 0o644
        archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


CRLF_SCAN_BYTES = 1 << 20  # a shell script's line endings show in its first MiB


def crlf_scripts(tarball: bytes) -> list[str]:
    """Members that a shell would misread: `.sh` files, or any file whose `#!` line ends in CR, with CRLF
    line endings (bash reads the CR into every command: `$'\\r': command not found`)."""
    found = []
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            head = archive.extractfile(member).read(CRLF_SCAN_BYTES)
            shebang = head.startswith(b"#!") and head.split(b"\n", 1)[0].endswith(b"\r")
            if (member.name.endswith(".sh") and b"\r\n" in head) or shebang:
                found.append(member.name)
    return found


def with_unix_line_endings(tarball: bytes, names: list[str]) -> bytes:
    """The tarball with each named member's CRLF line endings made LF (what `dos2unix` does)."""
    with tarfile.open(fileobj=io.BytesIO(tarball)) as archive:
        contents = {name: archive.extractfile(name).read().replace(b"\r\n", b"\n") for name in names}
    for name, content in contents.items():
        tarball = replace_member(tarball, name, content)
    return tarball


def shipped_problem(tarball: bytes, limit: int) -> str | None:
    if len(tarball) > limit:
        return (
            f"The source to ship is {len(tarball) / 1024**2:.1f} MiB, over the {limit / 1024**2:.1f} MiB a source "
            "may be (SOURCE_MAX_BYTES): keep data and checkpoints out of the source directory, and register "
            "datasets instead."
        )
    return None
