"""Whether a declared storage tier is the disk the data root is on: pure.

A tier is a disk, not a name on a form: a data root declared on RunPod's network volume that measures
on the container disk would count a copy as surviving a release it does not survive."""


def declared_tier_problem(declared: str, mounts: dict) -> str | None:
    """Why the preflight's measured mounts contradict the declared data tier, or None."""
    data, tier = mounts.get("data"), mounts.get("declared_tier")
    if not declared or not isinstance(data, dict) or not isinstance(tier, dict):
        return None
    if data.get("device") == tier.get("device"):
        return None
    return (
        f"The data root is on {data.get('fstype')} mounted at {data.get('mountpoint')} (device {data.get('device')}), "
        f"not on the declared tier “{declared}” ({tier.get('fstype')} at {tier.get('mountpoint')}, device "
        f"{tier.get('device')}): correct the tier on the box's page, or move the data root onto that disk."
    )
