"""Run a light probe or the full audit against an instance and describe the outcome.

No database writes here: the task hands the outcome to actions.do_record_probe.
"""

import time
from dataclasses import dataclass, field

from django.conf import settings

from fleet import audit
from fleet.node_client import first_contact_key, transport_for
from node.transport import HostKey, TransportError, Unreachable


@dataclass
class ProbeOutcome:
    kind: str
    reachable: bool
    ok: bool
    error: str = ""
    raw: str = ""
    parsed: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    duration_ms: int = 0
    seen_host_key: HostKey | None = None


def _script_for(kind: str, instance) -> tuple[str, float]:
    if kind == "audit":
        return audit.audit_script(instance.data_root), settings.AUDIT_TIMEOUT
    return audit.LIGHT_SCRIPT, settings.SSH_COMMAND_TIMEOUT


def run_probe(instance, kind: str) -> ProbeOutcome:
    started = time.monotonic()
    outcome = _probe(instance, kind)
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    return outcome


def _probe(instance, kind: str) -> ProbeOutcome:
    if not instance.profile.is_local and instance.pinned_host_key is None:
        try:
            key = first_contact_key(instance)
        except Unreachable as exc:
            return ProbeOutcome(kind, reachable=False, ok=False, error=str(exc))
        return ProbeOutcome(
            kind,
            reachable=True,
            ok=False,
            error=f"Host key {key.fingerprint} awaits confirmation; nothing was run.",
            seen_host_key=key,
        )
    script, timeout = _script_for(kind, instance)
    try:
        with transport_for(instance) as transport:
            result = transport.run_script(script, timeout=timeout)
    except Unreachable as exc:
        return ProbeOutcome(kind, reachable=False, ok=False, error=str(exc))
    except TransportError as exc:
        # Host-key mismatch, refused credential, timeout: we reached something but learned nothing.
        return ProbeOutcome(kind, reachable=True, ok=False, error=f"{type(exc).__name__}: {exc}")
    raw = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr.strip() else "")
    if kind != "audit":
        ok = audit.split_sections(result.stdout).get("reach") == ["ok"]
        return ProbeOutcome(kind, reachable=True, ok=ok, raw=raw, error="" if ok else "probe printed no marker")
    parsed = audit.parse_audit(result.stdout)
    storage = instance.profile.data["storage"]
    warnings = audit.audit_warnings(parsed, settings.LOW_FREE_BYTES, inode_cap=storage["inode_cap"])
    ok = parsed["reachable"] and parsed["disk"] is not None
    return ProbeOutcome(kind, True, ok, "" if ok else "audit output incomplete", raw, parsed, warnings)
