from tests.runs.conftest import box_row, gate, instance, make_run, node, project, source  # noqa: F401
