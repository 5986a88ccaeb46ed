"""The pre-rent gate, the worker's side: a rent asked for a run first proves that run on a box where no GPU
bills (the control host's local node, or a cheap box of the project named on the rent): the run's source
shipped, its input checks, its interpreter, and its CPU smoke, exactly as its preflight and smoke would on
the rented box. Only a proof that passes lets the rent be approved and created; one that fails creates
nothing (rentals/actions.py: do_finish_proof).

The proof runs a stand-in of the run: the same row, unsaved, with the proving box as its box, no GPUs
(the smoke is CPU only) and a run id of its own, so nothing it leaves on the box is ever taken for the
run's own attempt. The run's registered datasets are staged to the proving box first, as its preflight
stages them on the rented one, so a smoke that reads its data proves it. What only the rented box can
answer (its data paths, its GPUs) is left to the run's preflight there, and the proof says so.
"""

import contextlib
import copy
import time
from decimal import Decimal

from django.conf import settings

from node.protocol import NodeError
from node.transport import TransportError
from rentals.actions import do_claim_proof, do_finish_proof
from rentals.asking import run_signature
from rentals.models import Rental
from runs import shipping
from runs.actions.base import control_host_problem
from runs.box_spec import run_node
from runs.environment import environment_problems
from runs.models import SourceKind
from runs.sources import SourceError

OUTPUT_TAIL = 4000


def stand_in(run, box):
    """The run as the proving box runs it: its own run id there, CPU only, nothing the rented box holds."""
    proof = copy.copy(run)
    proof.instance, proof.instance_id = box, box.pk
    proof.run_id = f"{run.run_id}-proof"
    proof.gpus, proof.data_paths, proof.staging = [], [], {}
    proof.scheduler, proof.durable_ckpt, proof.secrets_in_smoke = {}, {}, False
    proof.preflight_report = {}
    return proof


def left_to_the_box(run) -> list[str]:
    """What the proof cannot check where no GPU bills: the rented box's preflight checks it. The run's
    registered datasets are staged to the proving box and read by its smoke there; a data path names a
    directory on the rented box itself."""
    said = [f"data path {path}" for path in run.data_paths]
    if run.gpus:
        said.append(f"GPU {', '.join(map(str, run.gpus))} (CUDA, count, model)")
    return said


def prove(rental_pk: int) -> str:
    """Claim the rent's proof and run it; what happened, in a word."""
    rental = do_claim_proof(rental_pk)
    if rental is None:
        return "nothing to do"
    related = ("run", "run__project", "run__definition_by", "run__created_by", "proving_box", "project", "requester")
    rental = Rental.objects.select_related(*related).get(pk=rental.pk)
    run, box = rental.run, rental.proving_box
    started = time.monotonic()
    proof = {"box": box.name if box else "no box", "left_to_the_box": left_to_the_box(run) if run else []}
    proof["run_signature"] = run_signature(run) if run else ""
    proof.update(_outcome(run, box, rental.requester))
    seconds = time.monotonic() - started
    rate = box.rate_running if box is not None else Decimal(0)
    cost = (rate * Decimal(seconds) / 3600).quantize(Decimal("0.0001"))
    proof.update(seconds=round(seconds, 1), rate=str(rate), cost=str(cost))
    do_finish_proof(rental_pk, proof)
    return "passed" if proof["passed"] else "failed"


def _outcome(run, box, requester) -> dict:
    """{passed, why, checks, smoke_exit_code, smoke_output, environment}: the proof's verdict."""
    if run is None or box is None:
        return {"passed": False, "why": "the rent names no run, or no box to prove it on (ask again, naming one)"}
    if run.source_kind == SourceKind.NODE_PATH:
        return {"passed": False, "why": "its source lives on the rented box, so nothing can prove it before the rent"}
    # The run as it is now, and whoever asked: an edit since the request (a re-proof has no actor) is judged
    # by who wrote it, before anything of it reaches the control host.
    if box.profile.is_local and (refused := control_host_problem(run, requester)):
        return {"passed": False, "why": f"it may not be proven on the control host: {refused}"}
    proof = stand_in(run, box)
    try:
        with run_node(proof) as node:
            node.prepare()
            shipping.ship_source(node)
            # The data the run names, staged here as on the rented box (hashed as it lands): a smoke that
            # reads $REMOTEGPU_DATA_DIR failed every proof while the stand-in dropped them.
            staged, unstaged = shipping.stage_datasets(node, lambda _progress: None)
            if unstaged:
                _set_aside(node, proof)
                why = "its datasets could not be staged for the proof: " + "; ".join(unstaged)
                return {"passed": False, "why": why}
            proof.staging = {"dirs": {item["name"]: item["target"] for item in staged}, "at": time.time()}
            report = node.call("preflight", node.write_spec("preflight", node.spec(0)), timeout=300)
            checks = _checks(report, box)
            if checks or run.secrets_in_smoke:
                _set_aside(node, proof)
                return _without_smoke(checks, report)
            smoke = node.call("smoke", node.write_spec("smoke", node.spec(0)), timeout=settings.SMOKE_TIMEOUT + 30)
            _set_aside(node, proof)
    except (TransportError, NodeError, SourceError, OSError) as exc:
        return {"passed": False, "why": f"{type(exc).__name__}: {exc}"[:1000]}
    code = smoke.get("exit_code") if isinstance(smoke.get("exit_code"), int) else -1
    output = str(smoke.get("output", ""))[-OUTPUT_TAIL:]
    said = {"checks": [], "smoke_exit_code": code, "smoke_output": output, "environment": _environment(report)}
    if code != 0 or "Traceback" in output:
        why = "a Traceback in its output" if code == 0 else f"exit code {code}"
        return {**said, "passed": False, "why": f"its CPU smoke failed ({why})"}
    return {**said, "passed": True, "why": ""}


def _without_smoke(checks: list[str], report: dict) -> dict:
    """The verdict when no smoke runs here: the checks failed, or the smoke reads run secrets, which go
    only to the run's own box (never to a proving box or the control host): its smoke is the rented box's."""
    if checks:
        return {"passed": False, "why": "; ".join(checks), "checks": checks}
    said = "its CPU smoke (it reads run secrets, which go only to the run's own box)"
    return {"passed": True, "why": "", "checks": [], "environment": _environment(report), "smoke_left": said}


def _set_aside(node, proof) -> None:
    """The proof's files on the proving box go into its quarantine with why they are there (nothing is
    deleted, and nothing of it is left in active/ for a later run of the same name to find)."""
    # Failing, the verdict stands: what is left is a proof's source and smoke output, named -proof.
    with contextlib.suppress(TransportError, NodeError):
        node.close_active(proof, f"the proof of {proof.run_id.removesuffix('-proof')} before its rent")


def _checks(report: dict, box) -> list[str]:
    """The input checks and the interpreter, as the rented box's preflight judges them."""
    problems = [f"missing {item['input']}: {item['path']}" for item in report.get("missing") or []]
    persistent = box.profile.data["identity"]["persistent"]
    return problems + environment_problems(report.get("environment") or {}, persistent)


def _environment(report: dict) -> dict:
    environment = report.get("environment") or {}
    return {key: str(environment.get(key) or "")[:100] for key in ("interpreter", "python", "torch")}
