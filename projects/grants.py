"""What a change of a registry entry's project grants says (credentials, chat variables): pure."""


def grant_changes(before: set[str], after: set[str], registered: bool) -> tuple[list[str], list[str], list[str]]:
    """(granted, revoked, the event's message parts) between two sets of project slugs."""
    granted, revoked = sorted(after - before), sorted(before - after)
    parts = ["Registered" if registered else "Changed"]
    parts += [f"granted to {', '.join(granted)}"] if granted else []
    parts += [f"revoked from {', '.join(revoked)}"] if revoked else []
    return granted, revoked, parts
