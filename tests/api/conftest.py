from tests.runs.conftest import (  # noqa: F401
    box_row,
    gate,
    instance,
    make_run,
    node,
    project,
    source,
    standin_checkpoints,
    standin_source,
    tinyfit_source,
)
