"""Where the control host keeps its custody copies: a path only, so that whatever asks where a copy
lives (the evidence model, removal) does not load what verifies one (torch, numpy, pyarrow)."""

from pathlib import Path

from django.conf import settings


def custody_dir(run) -> Path:
    return Path(settings.CUSTODY_ROOT) / run.project.slug / run.run_id
