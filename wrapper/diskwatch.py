"""How full the run root's disk got during an attempt: sampled while the command runs and when it exits.

A trainer that runs out of space inside `torch.save` may say so with no errno ("unexpected pos 1088 vs
982"), and its own cleanup (the failed `.tmp` removed) frees the space before it exits. So the disk is
measured every second while the command runs (the lowest free bytes and inodes kept) and again the
moment it exits, before the wrapper removes or copies anything. A command that failed with its disk
(nearly) full at either moment failed for want of space: disk_full, whose remediation is to free space,
not to fix the code."""

import threading

from .files import measure

SAMPLE_SECONDS = 1.0
# Nearly full: under 2% of the disk or 64 MiB free, whichever is less; inodes likewise (1%, 1000).
FULL_FRACTION, FULL_BYTES = 0.02, 64 << 20
FULL_INODE_FRACTION, FULL_INODES = 0.01, 1000


def nearly_full(sample):
    """Which of blocks / inodes were (nearly) gone in sample, or None."""
    low_bytes = min(FULL_BYTES, sample["total_bytes"] * FULL_FRACTION)
    if sample["total_bytes"] and sample["free_bytes"] <= low_bytes:
        return "bytes"
    low_inodes = min(FULL_INODES, sample["total_inodes"] * FULL_INODE_FRACTION)
    if sample["total_inodes"] and sample["free_inodes"] <= max(low_inodes, 2):
        return "inodes"
    return None


class DiskWatch:
    def __init__(self, path):
        self.path, self.lowest, self.at_exit = path, None, None

    def sample(self):
        """One measurement, kept as the lowest where it is lower; None where the disk cannot be read."""
        try:
            found = measure(self.path)
        except OSError:
            return None
        if self.lowest is None:
            self.lowest = dict(found)
        else:
            self.lowest["free_bytes"] = min(self.lowest["free_bytes"], found["free_bytes"])
            self.lowest["free_inodes"] = min(self.lowest["free_inodes"], found["free_inodes"])
        return found

    def loop(self, stop):
        self.sample()
        while not stop.wait(SAMPLE_SECONDS):
            self.sample()

    def start(self, stop):
        threading.Thread(target=self.loop, args=(stop,), daemon=True).start()

    def exited(self):
        """The measurement taken the moment the command exited."""
        self.at_exit = self.sample()

    def full_reason(self, code):
        """`disk_full: …` when a command that failed had its disk (nearly) full at its exit or before."""
        for when, sample in (("when it exited", self.at_exit), ("while it ran", self.lowest)):
            what = sample and nearly_full(sample)
            if what:
                left = f"{sample['free_bytes'] >> 10} KiB" if what == "bytes" else f"{sample['free_inodes']} inodes"
                return f"disk_full: command exited with code {code}; {left} free on {sample['measured_at']} {when}"
        return None
