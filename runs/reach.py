"""Whether a box can read a run's durable checkpoints: pure (no database, no node).

A continuation restores the newest durable checkpoints, so it is offered only where they can be read:
- a copy on the control host is uploaded to any box;
- otherwise the copy is on the durable tier of the box it was written on. A region-locked tier (a RunPod
  network volume, a Lambda filesystem, an AutoDL or Gpushare netdisk: the profile's `shared_fs`) is read
  only by a box of the same platform, in the same region, with the same volume or filesystem attached.
  A box whose region or volume is not known is not refused on that count (nothing measured says it
  differs); one known to differ is, with its reason.
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
    if source.region and target.region and source.region.lower() != target.region.lower():
        return (
            f"The run's only checkpoint copy is on {where}, region-locked to {source.region}; "
            f"{target.name} is in {target.region}{then}."
        )
    if source.durable_volume and target.durable_volume and source.durable_volume != target.durable_volume:
        return (
            f"The run's only checkpoint copy is on {source.durable_volume} ({where}); {target.name} has "
            f"{target.durable_volume} attached{then}."
        )
    return None
