"""Instances (one concrete GPU box), their history, probes, and platform acknowledgements.

One package: fleet/models/core.py and fleet/models/drift.py; everything is imported from here."""

from fleet.models.core import (  # noqa: F401 (the app's models, imported from here)
    INSTANCE_TRANSITIONS,
    MAY_BE_ON,
    ClockAlarm,
    Credential,
    CredentialKind,
    CredentialQuerySet,
    Instance,
    InstanceEvent,
    InstanceProbe,
    InstanceQuerySet,
    InstanceState,
    PlatformAcknowledgement,
    Resource,
)
from fleet.models.drift import (  # noqa: F401
    DriftKind,
    ProviderBalance,
    ProviderDrift,
    ProviderKeyUse,
)
