"""Pull one file with SHA-256 custody: stream once, hash while writing, rename only on a match.

A killed pull leaves `<name>.partial`; the next pull re-hashes what arrived and continues from its
end. No partially written file is ever visible under its final name.
"""

import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


class HashMismatch(Exception):
    pass


def _hash_existing(path: Path) -> tuple["hashlib._Hash", int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            size += len(block)
    return digest, size


def pull_file(transport, remote_path: str, final: Path, expected_bytes: int, expected_sha: str, progress=None) -> int:
    """Bytes transferred now (0 when the file was already in custody)."""
    if final.exists():
        digest, size = _hash_existing(final)
        if size == expected_bytes and digest.hexdigest() == expected_sha:
            return 0
        final.unlink()  # a wrong file under the final name is never trusted
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + ".partial")
    digest, offset = _hash_existing(partial) if partial.exists() else (hashlib.sha256(), 0)
    if offset > expected_bytes:
        partial.unlink()
        digest, offset = hashlib.sha256(), 0
    moved = 0
    with transport.reader(remote_path, offset) as remote, open(partial, "ab") as local:
        while True:
            block = remote.read(CHUNK)
            if not block:
                break
            local.write(block)
            digest.update(block)
            moved += len(block)
            if progress:
                progress(len(block))
        local.flush()
        os.fsync(local.fileno())
    if offset + moved != expected_bytes or digest.hexdigest() != expected_sha:
        partial.unlink()
        raise HashMismatch(
            f"hash mismatch for {final.name}: expected {expected_sha[:16]}… ({expected_bytes} bytes), "
            f"got {digest.hexdigest()[:16]}… ({offset + moved} bytes)"
        )
    os.replace(partial, final)
    return moved
