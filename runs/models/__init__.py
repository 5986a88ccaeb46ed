"""Runs (one experiment on one box), their events, GPU locks, sweeps and watch leases.

One package: runs/models/core.py and runs/models/sweeps.py; everything is imported from here."""

from runs.models.core import (  # noqa: F401 (the app's models, imported from here)
    EDITABLE_STATES,
    LIVE_STATES,
    RETRYABLE_STATES,
    RUN_TRANSITIONS,
    UNCLOSED_STATES,
    Capsule,
    GpuLock,
    GpuSample,
    InstanceTotals,
    LogChunk,
    ProjectTotals,
    Run,
    RunEvent,
    RunPeer,
    RunQuerySet,
    RunState,
    SourceKind,
    Totals,
    WatchLease,
)
from runs.models.sweeps import (  # noqa: F401
    SPEND_TRANSITIONS,
    SpendRequest,
    SpendStatus,
    Sweep,
)
