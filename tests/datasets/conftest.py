from tests.runs.conftest import *  # noqa: F403 (the loopback box, runs and their sources: its __all__)
