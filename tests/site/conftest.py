from tests.runs.conftest import instance, make_run, project, source  # noqa: F401
