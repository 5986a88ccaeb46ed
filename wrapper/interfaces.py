"""Which network interface carries a connection: the name the collectives are pinned to.

Measured, never guessed: the local address of a socket that reached (or was reached by) the rendezvous,
matched to the interface that holds it. IPv4 through SIOCGIFADDR on each interface, IPv6 from
/proc/net/if_inet6. Standard library only (the wrapper runs on the box's own interpreter)."""

import fcntl
import ipaddress
import socket
import struct

SIOCGIFADDR = 0x8915


def _ipv4_of(name):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def _ipv6_holders(address):
    try:
        with open("/proc/net/if_inet6") as table:
            lines = table.read(65536).splitlines()
    except OSError:
        return []
    wanted = ipaddress.IPv6Address(address).exploded.replace(":", "")
    return [fields[5] for fields in (line.split() for line in lines) if len(fields) == 6 and fields[0] == wanted]


def interface_of(address):
    """The interface holding the local address `address`, or "" where none does (or it is ambiguous)."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return ""
    mapped = parsed.ipv4_mapped if parsed.version == 6 else parsed
    if mapped is None:
        holders = _ipv6_holders(str(parsed))
    else:
        wanted = str(mapped)
        holders = [name for _, name in socket.if_nameindex() if _ipv4_of(name) == wanted]
    return holders[0] if len(holders) == 1 else ""


def interface_of_socket(sock):
    """The interface of a connected socket's local end."""
    try:
        return interface_of(sock.getsockname()[0])
    except OSError:
        return ""
