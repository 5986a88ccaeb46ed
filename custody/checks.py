"""Custody checks for each consequence, evaluated at request time and again at execution time.

Each returns a snapshot {"ok", "items": [{"label", "ok", "detail"}]} that is stored on the request;
execution compares its fresh snapshot with the approved one and refuses when the answer changed.
"""

import json
from dataclasses import asdict, dataclass

from django.conf import settings
from django.utils import timezone

from custody.evidence import Consequence, copies_of, in_flight, present_copies, survivors, touched
from custody.models import EvidenceLocation, ReleaseHold, TeardownKind
from custody.rehash import rehash
from profiles.transport import TransportError
from runs.layout import resolve_home
from runs.models import LIVE_STATES, UNCLOSED_STATES, Run, RunState
from runs.remote import InstanceNode

# Scans /proc on the node: processes holding a file open for writing, or working, under the root.
IDLE_SCRIPT = r"""
import json, os, sys
root = os.path.realpath(sys.argv[1]) + os.sep
busy = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if (os.path.realpath("/proc/%s/cwd" % pid) + os.sep).startswith(root):
            busy.append({"pid": int(pid), "why": "works in " + os.path.realpath("/proc/%s/cwd" % pid)})
            continue
        for fd in os.listdir("/proc/%s/fd" % pid):
            target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
            if not target.startswith(root):
                continue
            with open("/proc/%s/fdinfo/%s" % (pid, fd)) as info:
                flags = int(info.readline().split()[1], 8)
            if flags & 3:
                busy.append({"pid": int(pid), "why": "writes " + target})
                break
    except OSError:
        continue
print(json.dumps({"busy": busy}))
"""
UNCLOSED = UNCLOSED_STATES


@dataclass
class Item:
    label: str
    ok: bool
    detail: str
    waivable: bool = False  # an L3 approver may waive it at approval (unclosed active/ dirs)


def _snapshot(items: list[Item]) -> dict:
    blocking = [item.label for item in items if not item.ok and not item.waivable]
    return {
        "ok": all(item.ok for item in items),
        "blocking": blocking,
        "items": [asdict(item) for item in items],
    }


def _no_live_run(instance) -> Item:
    live = list(instance.runs.filter(state__in=LIVE_STATES).values_list("run_id", flat=True))
    return Item("No live run on the box", not live, ", ".join(live) + " still live" if live else "none live")


def _node_idle(instance) -> Item:
    root = instance.data_root
    try:
        with InstanceNode(instance) as node:  # resolves $HOME once, as every node session does
            argv = [settings.NODE_PYTHON, "-c", IDLE_SCRIPT, resolve_home(root, node.home)]
            result = node.transport.run(argv, timeout=settings.SSH_COMMAND_TIMEOUT)
        busy = json.loads(result.stdout.strip().splitlines()[-1])["busy"]
    except (TransportError, ValueError, IndexError, KeyError) as exc:
        return Item("No writer under the run roots", False, f"could not confirm the box is idle: {exc}")
    detail = "; ".join(f"pid {b['pid']} {b['why']}" for b in busy[:5]) or f"nothing writes under {root}"
    return Item("No writer under the run roots", not busy, detail)


def _no_expecting_watcher(instance) -> Item:
    lease = getattr(instance, "watch_lease", None)
    live = instance.runs.filter(state__in=LIVE_STATES).exists()
    expecting = bool(lease and lease.expires_at > timezone.now() and live)
    return Item("No watcher expecting progress", not expecting, "a watcher holds the lease" if expecting else "none")


def evidence_items(instance, planned: Consequence, deep: bool) -> list[Item]:
    """For each sealed export the consequence touches: does a verified copy survive it, and every
    other consequence in flight? deep: re-hash the surviving copies where they live."""
    if planned.kind == TeardownKind.DELETE_EVIDENCE:
        runs = Run.objects.filter(pk=planned.run_id)
    else:
        runs = instance.runs.filter(state=RunState.EXPORTED)
    items = []
    for run in runs.select_related("project", "instance").order_by("pk"):
        copies = copies_of(run)  # read once: what the consequence touches and what survives it
        lost = touched(run, planned, copies)
        if not lost:
            continue
        consequences = [planned, *in_flight(run, planned.request_id)]
        verdict = survivors(run, consequences, rehash if deep else None, copies)
        detail = "loses " + ", ".join(copy.label for copy in lost) + "; " + verdict.detail()
        items.append(Item(f"A verified copy of {run.run_id} survives", verdict.ok, detail))
    return items


def _unclosed_active(instance, waive_active: bool) -> list[Item]:
    unclosed = list(
        instance.runs.filter(state__in=UNCLOSED, active_closed_at__isnull=True).values_list("run_id", flat=True)
    )
    if not unclosed:
        return []
    detail = "active/ not closed: " + ", ".join(unclosed) + ("; waived by the approver" if waive_active else "")
    return [Item("Every active/ directory closed or waived", waive_active, detail, waivable=True)]


def shutdown_checks(instance, planned: Consequence, waive_active: bool = False, deep: bool = True) -> dict:
    """deep: also ask the node (over SSH) whether anything still writes under the run roots."""
    items = [_no_live_run(instance), _no_expecting_watcher(instance)]
    if deep and not instance.profile.is_local:
        items.append(_node_idle(instance))
    items += evidence_items(instance, planned, deep)
    if instance.profile.loses(instance.data_tier_info, "shutdown"):
        items += _unclosed_active(instance, waive_active)
    clock = release_clock(instance.profile)
    if clock:
        items.append(Item("Release clock", True, clock))
    return _snapshot(items)


def release_clock(profile) -> str:
    hours = profile.stopped_released_after_hours
    if hours is None:
        return ""
    lost = ", ".join(f"{t['name']} ({t['path']})" for t in profile.tiers if profile.loses(t, "release")) or "nothing"
    return f"a stopped box is released by {profile.name} after {hours} h, and with it: {lost}"


def release_checks(instance, planned: Consequence, waive_active: bool, retire_hold: bool, deep: bool = True) -> dict:
    """deep: re-hash each surviving copy where it lives instead of trusting its record."""
    items = [_no_live_run(instance), *evidence_items(instance, planned, deep)]
    items += _unclosed_active(instance, waive_active)
    hold = active_hold(instance)
    if hold:
        detail = f"“never release” hold by {hold.created_by}: {hold.reason}"
        items.append(Item("No “never release” hold", retire_hold, detail + ("; to be retired" if retire_hold else "")))
    profile = instance.profile
    lost = ", ".join(f"{t['name']} ({t['path']})" for t in profile.tiers if profile.loses(t, "release")) or "nothing"
    items.append(Item("What release destroys", True, lost))
    return _snapshot(items)


def deletion_checks(run, planned: Consequence, deep: bool = True) -> dict:
    label = EvidenceLocation(planned.location).label
    exists = planned.location in present_copies(run)
    items = [Item(f"The {label} exists", exists, "present" if exists else "already gone")]
    if exists:
        items += evidence_items(run.instance, planned, deep)
    return _snapshot(items)


def checks_for(request, deep: bool = True) -> dict:
    planned = Consequence.of(request)
    if request.kind == TeardownKind.SHUTDOWN:
        return shutdown_checks(request.instance, planned, request.waive_active, deep)
    if request.kind == TeardownKind.RELEASE:
        return release_checks(request.instance, planned, request.waive_active, request.retire_hold, deep)
    return deletion_checks(request.run, planned, deep)


def active_hold(instance) -> ReleaseHold | None:
    return instance.holds.filter(retired_at__isnull=True).first()
