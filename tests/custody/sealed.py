"""Sealed exports on the loopback box, as a finished verification leaves them.

The export, the durable mirror and the custody copy are real files with real SHA-256s; the
custody record and its artifacts are what `custody.verify` records (tested end to end elsewhere).
The node is this machine over the loopback sshd, so `$HOME` on the node is this user's home.
"""

import hashlib
import os
import shutil
from pathlib import Path

from custody.models import Artifact, CustodyRecord
from custody.verify import custody_dir
from runs.models import RunState
from tests import factories
from tests.worker_env import WORKER

FILES = {"run.json": b'{"run": 1}\n', "config.yaml": b"lr: 0.01\n", "train.csv": b"epoch,loss\n0,1.0\n1,0.5\n"}
# A durable disk of its own on the loopback box: a tmpfs mounted here for the session (durable_mount),
# as a RunPod network volume or AutoDL's file storage is a mount of its own.
MIRROR_ROOT = f"$HOME/proj-durable-{WORKER or 'main'}"


def node_path(path: str) -> Path:
    return Path(path.replace("$HOME", os.path.expanduser("~"), 1))


def export_dir(run) -> Path:
    return node_path(run.instance.data_root) / run.project.slug / "export" / run.run_id


def durable_root(run) -> Path:
    return node_path(run.instance.mirror_root or MIRROR_ROOT)


def mirror_dir(run) -> Path:
    return durable_root(run) / "remotegpu-custody" / run.project.slug / run.run_id


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def seal(run, files: dict[str, bytes] | None = None) -> None:
    """The run exported: its sealed export on the box, nothing verified yet."""
    write_tree(export_dir(run), files or {**FILES, "best.pth": os.urandom(256)})
    type(run).objects.filter(pk=run.pk).update(state=RunState.EXPORTED)
    run.refresh_from_db()


def verify(run, mirror: bool = False) -> CustodyRecord:
    """Custody of the sealed export: the custody copy on the control host, and optionally the mirror.

    The mirror is written only where the node's own measurement accepts the durable root (the
    wrapper's durable_problem: an existing disk other than the data root's), as `cmd_mirror` does."""
    source = export_dir(run)
    files = {str(p.relative_to(source)): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}
    write_tree(custody_dir(run), files)
    record = factories.verified_record(
        run,
        uri=str(custody_dir(run)),
        total_bytes=sum(map(len, files.values())),
        file_count=len(files),
    )
    Artifact.objects.bulk_create(
        Artifact(record=record, path=name, bytes=len(data), sha256=hashlib.sha256(data).hexdigest(), verified=True)
        for name, data in files.items()
    )
    if mirror:
        from tests.runs.conftest import load_wrapper

        wrapper, root = load_wrapper(), str(durable_root(run))
        if wrapper.durable_problem(str(node_path(run.instance.data_root)), root, str(mirror_dir(run))) is None:
            write_tree(mirror_dir(run), files)
            record.mirror_uri, record.mirror_verified = str(mirror_dir(run)), True
            record.mirror_tier = run.instance.mirror_tier_info["name"]
            record.mirror_mount = wrapper.mount_of(root)  # measured, as the mirror is
            record.save()
    return record


def tamper(root: Path) -> None:
    victim = next(p for p in sorted(root.rglob("*")) if p.is_file())
    data = bytearray(victim.read_bytes())
    data[0] ^= 1
    victim.write_bytes(bytes(data))


def intact(root: Path, record: CustodyRecord) -> bool:
    for artifact in record.artifacts.all():
        path = root / artifact.path
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != artifact.sha256:
            return False
    return True


def cleanup(run) -> None:
    for root in (export_dir(run), mirror_dir(run), custody_dir(run)):
        shutil.rmtree(root, ignore_errors=True)


def mount_durable_root() -> bool:
    """Mount a small tmpfs at MIRROR_ROOT (once; root only): the loopback box's durable disk."""
    import subprocess

    root = node_path(MIRROR_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(root):
        return True
    if os.geteuid() != 0:
        return False
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(root)], check=True)
    return True


def unmount_durable_root() -> None:
    import subprocess

    root = node_path(MIRROR_ROOT)
    if os.path.ismount(root):
        subprocess.run(["umount", "-l", str(root)], check=False)
