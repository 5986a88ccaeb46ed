"""One verification: roster on the node → pull with SHA-256 custody → independent readback."""

import json
import time
from pathlib import Path

from django.conf import settings

from custody import actions
from custody.model_run import model_run_gates
from custody.project_metrics import extra_metrics
from custody.readback import read_back
from custody.roster import RosterError, parse_roster
from custody.selection import LIMIT as SELECTION_LIMIT
from custody.selection import selection_id
from custody.store import custody_dir
from node.pull import HashMismatch, Pace, only_puller, pull_export
from node.transport import TransportError
from platforms import catalog
from platforms.layout import resolve_home
from runs.box_spec import run_node
from runs.models import Capsule


def custody_lock(canonical: Path):
    """One pull per custody copy at a time (pull.only_puller)."""
    return only_puller(canonical.parent / f".{canonical.name}.lock")


class ProgressMeter:
    """Counts bytes and files as they land and reports at most twice a second (row + live push).

    It also keeps the pull at or under CUSTODY_PULL_MAX_RATE, so a pull can share a box's uplink.
    """

    def __init__(self, record, total_bytes: int, total_files: int, max_rate: int = 0):
        self.record, self.total_bytes, self.total_files = record, total_bytes, total_files
        self.pace = Pace(max_rate)
        self.bytes = self.files = 0
        self.started = self.last = self.pace.started

    def advance(self, moved: int, files: int) -> None:
        self.bytes += moved
        self.files += files
        self.pace.advance(moved)
        if time.monotonic() - self.last >= 0.5:
            self.report()

    def report(self, final: bool = False) -> None:
        self.last = time.monotonic()
        rate = self.bytes / max(self.last - self.started, 1e-6)
        eta = 0.0 if final or not rate else (self.total_bytes - self.bytes) / rate
        actions.do_record_progress(self.record.pk, self.bytes, self.files, rate=rate, eta=eta)


def _mirror(node, record, warnings: list) -> None:
    """Node → the box's durable tier first, where it has one: that copy survives release. It counts on
    its tier only where the measured mount is that tier's (a declaration or a path is not a disk)."""
    target = node.mirror_target()
    if target is None:
        return
    try:
        answer = node.mirror(target)
    except TransportError as exc:
        warnings.append(f"no durable mirror on the node: {exc}")
        return
    tier, mount = node.instance.mirror_tier_info, answer["mount"]
    problem = catalog.mount_problem({**tier, "path": resolve_home(str(tier.get("path") or ""), node.home)}, mount)
    if problem:
        warnings.append(f"the mirror at {target} does not count as durable: {problem}")
        return
    actions.do_record_mirror(record.pk, target, True, tier["name"], mount)


def _pull(record, canonical: Path, warnings: list) -> tuple[list, dict, bytes | None]:
    """The export pulled into canonical, and the selection manifest its run.json binds, read from the box."""
    with run_node(record.run) as node:
        node.prepare()
        entries = parse_roster(node.roster())
        actions.do_record_roster(record.pk, entries, str(canonical))
        _mirror(node, record, warnings)
        meter = ProgressMeter(record, sum(e.bytes for e in entries), len(entries), settings.CUSTODY_PULL_MAX_RATE)
        stats = pull_export(node.transport, node.layout.export, entries, canonical, meter.advance)
        meter.report(final=True)
        name = selection_id(_run_json(canonical))
        manifest = node.selection_manifest(name, SELECTION_LIMIT) if name else None
    seconds = round(time.monotonic() - meter.started, 3)
    return entries, {**stats.__dict__, "seconds": seconds}, manifest


def _run_json(canonical: Path) -> dict:
    try:
        run = json.loads((canonical / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return run if isinstance(run, dict) else {}


def verify(record) -> None:
    canonical = custody_dir(record.run)
    with custody_lock(canonical) as held:
        if not held:
            actions.do_finish_verification(
                record.pk, None, "another verification of this run is pulling now; run it again when that one ends"
            )
            return
        # Holding the lock proves no one else is pulling: earlier unfinished records lost their worker.
        actions.do_close_interrupted(record.run_id, record.pk)
        warnings = []
        try:
            entries, pull, manifest = _pull(record, canonical, warnings)
        except (RosterError, HashMismatch, TransportError, OSError) as exc:
            # OSError: whatever a roster the checks missed makes the custody store refuse; never left pulling.
            actions.do_finish_verification(record.pk, None, f"{type(exc).__name__}: {exc}"[:2000])
            return
        if not any(entry.path == "train.csv" for entry in entries):  # paperwork (DOMAIN §4): a gap, recorded
            warnings.append("train.csv is missing: recorded as a gap; every metric is recomputed from the predictions")
        try:
            extra = extra_metrics(record.run.project)
            hardware = record.run.capsule == Capsule.HARDWARE
            tolerance = settings.METRIC_TOLERANCE
            evidence = read_back(canonical, entries, tolerance, extra, hardware=hardware, manifest=manifest)
            failed, said = model_run_gates(record.run, evidence["capsule"])
            evidence["failures"] += failed
            warnings += said
        except Exception as exc:  # noqa: BLE001 — whatever a hostile export makes the reader raise, fail closed
            actions.do_finish_verification(record.pk, None, f"read-back failed ({type(exc).__name__}): {exc}"[:2000])
            return
        evidence["warnings"] = warnings + evidence["warnings"]
        actions.do_finish_verification(record.pk, {**evidence, "pull": pull})
