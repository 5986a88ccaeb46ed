from tests.runs.conftest import instance, make_run, project, source, standin_checkpoints, standin_source, tinyfit_source  # noqa: F401
