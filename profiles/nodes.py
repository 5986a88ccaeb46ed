"""Open a transport to an instance: LocalTransport for the local profile, SSHTransport otherwise."""

from django.conf import settings

from profiles.credentials import ssh_auth
from profiles.transport import CredentialError, LocalTransport, SSHTransport, Transport, scan_host_key


def transport_for(instance) -> Transport:
    if instance.profile.is_local:
        if not settings.LOCAL_NODE:
            # Fail closed: a box registered while it was on runs nothing once the deployment turns it off.
            raise CredentialError("this deployment does not run commands on the control host (REMOTEGPU_LOCAL_NODE)")
        return LocalTransport(user=settings.LOCAL_NODE_USER or None)
    return SSHTransport(
        instance.host,
        instance.port,
        instance.user,
        pinned=instance.pinned_host_key,
        auth=ssh_auth(instance),
        connect_timeout=settings.SSH_CONNECT_TIMEOUT,
        keepalive=settings.SSH_KEEPALIVE,
    )


def first_contact_key(instance):
    """The host key a box offers, learned without authenticating or running anything."""
    return scan_host_key(instance.host, instance.port, settings.SSH_CONNECT_TIMEOUT)
