"""One verification: roster on the node → pull with SHA-256 custody → independent readback."""

import time
from pathlib import Path

from django.conf import settings

from custody import actions
from custody.pull import HashMismatch, pull_file
from custody.readback import read_back
from custody.roster import RosterError, parse_roster
from profiles.transport import TransportError
from runs.remote import NodeSession


def custody_dir(run) -> Path:
    return Path(settings.CUSTODY_ROOT) / run.project.slug / run.run_id


def verify(record) -> None:
    run = record.run
    canonical = custody_dir(run)
    try:
        with NodeSession(run) as node:
            node.prepare()
            entries = parse_roster(node.roster())
            actions.do_record_roster(record.pk, entries, str(canonical))
            done_bytes, done_files, last_report = 0, 0, 0.0

            def progress(moved: int) -> None:
                nonlocal done_bytes, last_report
                done_bytes += moved
                if time.monotonic() - last_report > 0.5:
                    actions.do_record_progress(record.pk, done_bytes, done_files)
                    last_report = time.monotonic()

            for entry in entries:
                remote = f"{node.layout.export}/{entry.path}"
                pull_file(node.transport, remote, canonical / entry.path, entry.bytes, entry.sha256, progress)
                done_files += 1
            actions.do_record_progress(record.pk, sum(e.bytes for e in entries), done_files)
    except (RosterError, HashMismatch, TransportError) as exc:
        actions.do_finish_verification(record.pk, None, f"{type(exc).__name__}: {exc}")
        return
    actions.do_finish_verification(record.pk, read_back(canonical, entries, settings.METRIC_TOLERANCE))
