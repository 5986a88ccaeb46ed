"""The storage budget: required bytes + margin, and inodes, against what the node has free."""

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Budget:
    required_bytes: int
    margin_bytes: int
    free_bytes: int
    required_inodes: int
    free_inodes: int
    measured_at: str
    mirror_bytes: int = 0  # of required_bytes: the checkpoint mirror's copies, where it shares the disk
    mirror_problem: str = ""  # the mirror's own disk, measured too short for its copies

    @property
    def needed_bytes(self) -> int:
        return self.required_bytes + self.margin_bytes

    @property
    def short_bytes(self) -> int:
        return max(0, self.needed_bytes - self.free_bytes)

    @property
    def short_inodes(self) -> int:
        return max(0, self.required_inodes - self.free_inodes)

    def problems(self) -> list[str]:
        found = [self.mirror_problem] if self.mirror_problem else []
        if self.short_bytes:
            found.append(
                f"Not enough space on {self.measured_at}: needs {self.required_bytes / GIB:.2f} GiB "
                f"+ {self.margin_bytes / GIB:.2f} GiB margin = {self.needed_bytes / GIB:.2f} GiB, "
                f"free {self.free_bytes / GIB:.2f} GiB: short by {self.short_bytes:,} bytes "
                f"({self.short_bytes / GIB:.2f} GiB). Free space or expand the disk; do not shrink the run."
            )
        if self.short_inodes:
            found.append(
                f"Not enough inodes on {self.measured_at}: needs {self.required_inodes:,}, "
                f"free {self.free_inodes:,}: short by {self.short_inodes:,} inodes."
            )
        return found

    def as_dict(self) -> dict:
        return {
            "required_bytes": self.required_bytes,
            "margin_bytes": self.margin_bytes,
            "needed_bytes": self.needed_bytes,
            "free_bytes": self.free_bytes,
            "short_bytes": self.short_bytes,
            "required_inodes": self.required_inodes,
            "free_inodes": self.free_inodes,
            "short_inodes": self.short_inodes,
            "measured_at": self.measured_at,
            "mirror_bytes": self.mirror_bytes,
        }


# The closeout copies output/ into export/.partial before the rename: for that moment the export's
# checkpoints (best.pth and last.pth) exist twice on the data disk (a run that fit its budget
# filled the disk at its very last step).
STAGED_CHECKPOINTS = 2


def required_bytes(run) -> int:
    """The bytes the run writes on its data disk: retained checkpoints, scratch, the export's staging."""
    staged = run.checkpoint_bytes * STAGED_CHECKPOINTS
    return run.checkpoint_bytes * run.checkpoints_retained + run.scratch_bytes + staged


def mirror_bytes(run) -> int:
    """The checkpoint mirror's copies on the durable tier: the retained ones and a best."""
    return run.checkpoint_bytes * (run.checkpoints_retained + 1)


def _mirror(run, space: dict) -> tuple[int, str]:
    """(the mirror's bytes counted on the data disk, the mirror's own disk's shortfall said) from what the
    box measured; a box that did not measure the mirror's disk adds nothing (no mirror there)."""
    mirror = space.get("mirror")
    if not isinstance(mirror, dict) or not isinstance(mirror.get("free_bytes"), int):
        return 0, ""
    needed = mirror_bytes(run)
    if mirror.get("device_id") == space.get("device_id"):
        return needed, ""
    if needed <= mirror["free_bytes"]:
        return 0, ""
    where = str(mirror.get("measured_at", "the durable tier"))[:300]
    return 0, (
        f"Not enough space for the checkpoint mirror on {where}: needs {needed / GIB:.2f} GiB, free "
        f"{mirror['free_bytes'] / GIB:.2f} GiB. Free space on the durable tier, or keep fewer checkpoints."
    )


def storage_budget(run, space: dict, margin_fraction: float, margin_min_bytes: int) -> Budget:
    mirrored, mirror_problem = _mirror(run, space)
    required = required_bytes(run) + mirrored
    return Budget(
        required_bytes=required,
        margin_bytes=max(int(required * margin_fraction), margin_min_bytes),
        free_bytes=space["free_bytes"],
        # Checkpoint rotation briefly holds one extra file per retained checkpoint; the staged export
        # holds its two checkpoints once more.
        required_inodes=run.expected_files + 2 * run.checkpoints_retained + STAGED_CHECKPOINTS,
        free_inodes=space["free_inodes"],
        measured_at=space["measured_at"],
        mirror_bytes=mirrored,
        mirror_problem=mirror_problem,
    )
