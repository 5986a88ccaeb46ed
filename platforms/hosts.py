"""What a box's SSH host may be, wherever it comes from (a person's form, a provider's answer): pure."""

import re

HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[?[0-9A-Fa-f:]+\]?")


def valid_host(host: str) -> bool:
    """A DNS name or an IP address: no spaces, no leading '-', nothing a shell or ssh reads as an option."""
    return isinstance(host, str) and 0 < len(host) <= 253 and HOST.fullmatch(host) is not None
