"""What the control host tells a box about one attempt of a run (wrapper/contract.py's Spec), built here,
where the run lives, from the run and the box as the run's node client sees them (fleet/node_client.RunNode,
the box level: its layout, home, hooks): inputs, environment, checkpoint mirror, restore, distributed
shape. The spec is checked by the same strict reader the box uses before it is sent: a key the wrapper does
not know never leaves here."""

import re

from django.conf import settings

from fleet.credentials import secret_names
from fleet.node_client import RunNode
from node import slurm
from platforms.layout import resolve_home
from wrapper.contract import Spec, spec_of


def data_environment(staged: dict[str, str]) -> dict[str, str]:
    """Where the command finds its staged datasets: $REMOTEGPU_DATA_DIR (the first) and one variable each."""
    env = {f"REMOTEGPU_DATASET_{re.sub(r'[^A-Z0-9]', '_', name.upper())}": path for name, path in staged.items()}
    if staged:
        env["REMOTEGPU_DATA_DIR"] = next(iter(staged.values()))
    return env


def pinned(shape: dict, measured) -> dict:
    """The collectives' interface: the one a person named, else the one the preflight measured the
    rendezvous going through on this node (never a guess: torch's own pick follows the hostname)."""
    if shape.get("ifname") or not slurm.interface_name(measured):
        return shape
    return shape | {"ifname": measured}


def cluster_interface(report: dict) -> str | None:
    """A cluster's nodes' interface, where every node of the preflight reached the rendezvous through one
    of the same name (the job's nodes are the scheduler's pick: only a cluster-wide name can be pinned)."""
    answers = ((report.get("slurm") or {}).get("nodes")) or []
    names = {(answer.get("rendezvous") or {}).get("ifname") for answer in answers if isinstance(answer, dict)}
    return names.pop() if len(answers) > 1 and len(names) == 1 else None


def inputs_of(node, staged: dict, manifest: str | None, restore: dict) -> list[list[str]]:
    """What the command refuses to start without, each checked on the node before the launch."""
    run, layout = node.run, node.layout
    inputs = [["config", layout.under_src(run.config_path)]]
    inputs += [["data", resolve_home(path, node.home)] for path in run.data_paths]
    inputs += [[f"dataset {name}", path] for name, path in staged.items()]
    if manifest:
        inputs.append(["manifest", manifest])
    for item in restore["files"]:
        inputs.append([f"durable checkpoint {item['name']}", f"{restore['from']}/{item['file']}"])
    return inputs


def ckpt_mirror_of(node) -> dict:
    """Checkpoints copied to the durable tier as they land (none where the box has no durable root)."""
    return {
        "root": node.durable_root(),
        "target": node.ckpt_target(),
        "keep": node.run.checkpoints_retained,
        "poll_seconds": settings.CKPT_MIRROR_POLL_SECONDS,
        "hold_seconds": settings.CKPT_HOLD_SECONDS,
        "step_key": node.run.step_key or None,  # read first, before the usual keys
    }


def spec_for(node, attempt: int) -> Spec:
    run, layout = node.run, node.layout
    staged = (run.staging or {}).get("dirs") or {}
    manifest = resolve_home(run.manifest_path, node.home) if run.manifest_path else None
    restore = restore_for(node, attempt)
    return spec_of(
        {
            **layout.as_dict(),
            "run_id": run.run_id,
            "attempt": attempt,
            # A Slurm box: the job's requeues count as attempts, each with its own output (wrapper/scheduler.py).
            "scheduler": "slurm" if node.instance.profile.runs_jobs else None,
            # Over several nodes or processes: the wrapper starts torchrun on every node (wrapper/distributed.py).
            "distributed": distributed_of(node),
            "argv": run.command,
            "cwd": layout.src,
            "env": {**data_environment(staged), **node.env},
            # The names the command gets its run secrets under (the values travel only on put-secrets'
            # stdin); the smoke gets them only when the run asks.
            "secrets": secret_names(run) if attempt or run.secrets_in_smoke else [],
            "hooks": node.hooks,
            "gpus": run.gpus,
            # Whether nvidia-smi answered at preflight: the box's own relaunch holds itself to the same gate.
            "gpus_at_preflight": {"nvidia_smi": True}
            if isinstance(run.preflight_report.get("gpu_holders"), dict)
            else None,
            "environment": resolve_home(run.environment, node.home) if run.environment else "",
            "inputs": inputs_of(node, staged, manifest, restore),
            "config": layout.under_src(run.config_path),
            "manifest": manifest,
            "heartbeat_seconds": settings.RUN_HEARTBEAT_SECONDS,
            "stop_grace_seconds": settings.RUN_STOP_GRACE_SECONDS,
            # Rewritten by the platform's start hook, so a container restart is seen as one.
            "boot_marker": node.boot_marker(),
            "smoke_timeout": settings.SMOKE_TIMEOUT,
            # A declared tier is measured: preflight reports the mount of its path beside the data root's.
            "data_tier_path": declared_tier_path(node),
            "ckpt_mirror": ckpt_mirror_of(node),
            "restore": restore if restore["files"] else None,
            "dataset_files": node.dataset_files,
            # The no-edit path: where the unchanged script leaves its files (the box builds the export).
            "trainer_files": node.run.trainer_files or None,
            "capsule": node.run.capsule,  # a hardware capsule is checked by its own contract at sealing
            # The box's start hook may start this attempt again after a restart, with no control plane
            # (boot-resume): only where the run opted in to relaunches, and never with secrets (read once).
            "boot_relaunch": {"max": node.run.max_relaunches - node.run.relaunches}
            if node.run.auto_relaunch and not node.run.secrets and attempt
            else None,
        }
    )


def distributed_of(node) -> dict | None:
    """A cluster's run: from its job options. A run over several boxes: this box's node of it, the
    rendezvous on rank 0's box at the port its preflight measured there."""
    report = node.run.preflight_report or {}
    if node.instance.profile.runs_jobs:
        shape = slurm.JobOptions.of(node.run.slurm_options).distributed_spec()
        return shape and pinned(shape, cluster_interface(report))
    if "multinode" not in (node.run.scheduler or {}):
        return None
    peers = list(node.run.peers.all())
    if not peers:
        return None
    options = slurm.JobOptions.of({**node.run.multinode, "nodes": len(peers) + 1})
    meeting = report.get("rendezvous") or {}
    rank = node.peer.rank if node.peer is not None else 0
    shape = {**options.distributed_spec(), "node_rank": rank, "role": "peer" if rank else "head"}
    shape = pinned(shape, (meeting.get("ifnames") or {}).get(str(rank)))
    return shape | {"master_addr": meeting.get("address", ""), "master_port": meeting.get("port", 0)}


def restore_for(node, attempt: int) -> dict:
    """The durable checkpoints an attempt continued on this box starts from: {"from", "files"}: the
    box's durable tier, or the inbox the control host uploads its own copies to (consumed there)."""
    restore = (node.run.durable_ckpt or {}).get("restore") or {}
    files = restore.get("files") if restore.get("attempt") == attempt and attempt else None
    if restore.get("from_control"):
        return {"from": node.layout.ckpt_inbox, "files": files or [], "consume": True}
    return {"from": node.ckpt_target() or "", "files": files or []}


def declared_tier_path(node) -> str | None:
    tier = node.instance.profile.tier_named(node.instance.data_tier) if node.instance.data_tier else None
    return resolve_home(tier["path"], node.home) if tier else None


def run_node(run, env=None, dataset_files=None, peer=None) -> RunNode:
    """The run's node client, told how to build the run's specs (this module)."""
    import runs.box_spec as builder  # noqa: PLC0415 (this module, passed as the builder)

    return RunNode(run, env=env, dataset_files=dataset_files, peer=peer, builder=builder)
