from tests.runs.conftest import instance, make_run, node, project, source  # noqa: F401 (the loopback box and runs)
