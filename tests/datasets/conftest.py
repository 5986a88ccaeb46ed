from tests.runs.conftest import (  # noqa: F401
    instance,
    make_run,
    node,
    project,
    source,
    standin_checkpoints,
    standin_source,
    tinyfit_source,
)  # noqa: F401 (the loopback box and runs)
