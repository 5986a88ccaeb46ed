"""`reseal`: an attempt quarantined for its paperwork alone, sealed after all, on a person's word.

Before paperwork warned (export.PAPERWORK), a finished training without train.csv was quarantined as a
contract failure, never retried, with nothing left to do. Its staged export was kept with it
(quarantine/<run>--<attempt>/export-partial): this checks it again by today's contract, and where nothing
but paperwork is missing seals it as closeout would (the roster recorded, the atomic rename, the gap
written beside it). Anything that can make a number wrong still refuses, named.
"""

import json
import os

from .attempts import quarantine_dir
from .export import PAPERWORK_FILE, contract_reason, export_problems, paperwork_gaps
from .files import atomic_write
from .roster import roster_of, sealed_roster_path


def cmd_reseal(spec):
    quarantined = quarantine_dir(spec)
    staged = os.path.join(quarantined, "export-partial")
    if os.path.lexists(spec.export):
        return _said(False, f"export/{spec.run_id} is already sealed; changed bytes need a new run id")
    if not os.path.isdir(staged) or os.path.islink(staged):
        return _said(False, "no staged export was kept with the quarantined attempt: run it again instead")
    problems = export_problems(spec, staged)
    if problems:
        return _said(False, contract_reason(problems))
    gaps = paperwork_gaps(staged)
    atomic_write(os.path.join(quarantined, PAPERWORK_FILE), json.dumps(gaps))
    os.makedirs(spec.active, exist_ok=True)
    atomic_write(sealed_roster_path(spec), json.dumps(roster_of(staged)))
    os.makedirs(os.path.dirname(spec.export), exist_ok=True)
    os.rename(staged, spec.export)  # atomic on one filesystem; never over an existing export
    print(json.dumps({"sealed": True, "paperwork": gaps}))
    return 0


def _said(sealed, reason):
    print(json.dumps({"sealed": sealed, "reason": reason}))
    return 0
