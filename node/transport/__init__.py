"""The node transport: one small interface, two implementations (SSH via paramiko, local subprocess)."""

from node.transport.base import (
    AnswerTooLarge,
    CommandResult,
    CommandTimeout,
    CredentialError,
    HostKeyMismatch,
    HostKeyUnknown,
    PathStat,
    Transport,
    TransportError,
    Unreachable,
    shell_path,
)
from node.transport.local import LocalTransport
from node.transport.ssh import HostKey, SSHTransport, scan_host_key

__all__ = [
    "AnswerTooLarge",
    "CommandResult",
    "CommandTimeout",
    "CredentialError",
    "HostKey",
    "HostKeyMismatch",
    "HostKeyUnknown",
    "LocalTransport",
    "PathStat",
    "SSHTransport",
    "Transport",
    "TransportError",
    "Unreachable",
    "scan_host_key",
    "shell_path",
]
