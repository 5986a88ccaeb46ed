"""Whether a box can read a run's durable checkpoints: pure (no database, no node).

A continuation restores the newest durable checkpoints, so it is offered only where they can be read:
- a copy on the control host is uploaded to any box;
- otherwise the copy is on the durable tier of the box it was written on. A region-locked tier (a RunPod
  network volume, a Lambda filesystem, an AutoDL or Gpushare netdisk: the profile's `shared_fs`) is read
  only by a box of the same platform, in the same region, with the same volume or filesystem attached.
  Unknown is not "same": a box whose region or volume is not known (on either side) is refused with what
  is unknown, and a person says it on the box's page (or pulls a copy to the control host) before a move
  whose new box would boot, preflight and bill only to fail at its restore.
"""


def region_locked(profile) -> bool:
    shared = profile.data["storage"].get("shared_fs") or {}
    return bool(shared.get("region_locked"))


def reach_problem(source, target, from_control: bool) -> str | None:
    """Why target cannot read the durable checkpoints written on source, or None."""
    if from_control:
        return None
    if not (target.mirror_root or target.profile.durable_root):
        return f"{target.name} has no durable root: it cannot read the run's durable checkpoints."
    if not region_locked(source.profile):
        return None
    where = f"{source.name}'s {source.profile.name} durable tier"
    then = "; pull a copy to the control host first, or continue on a box that shares it"
    if target.profile_key != source.profile_key:
        return f"The run's only checkpoint copy is on {where}, which a {target.profile.name} box cannot read{then}."
    boxes = (source, target)
    unknown = [f"{box.name}'s {what}" for what in ("region", "volume") for box in boxes if not _of(box, what)]
    if unknown:
        return (
            f"The run's only checkpoint copy is on {where}, which is region-locked, and {' and '.join(unknown)} "
            f"{'is' if len(unknown) == 1 else 'are'} not known: unknown is not the same. Say it on the box's page"
            f" (its region and volume){then}."
        )
    if source.region.lower() != target.region.lower():
        return (
            f"The run's only checkpoint copy is on {where}, region-locked to {source.region}; "
            f"{target.name} is in {target.region}{then}."
        )
    if source.durable_volume != target.durable_volume:
        return (
            f"The run's only checkpoint copy is on {source.durable_volume} ({where}); {target.name} has "
            f"{target.durable_volume} attached{then}."
        )
    return None


def _of(box, what: str) -> str:
    return (box.region if what == "region" else box.durable_volume) or ""
