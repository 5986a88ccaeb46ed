"""DELIVER's tests run against the same real node fixtures as the custody tests: the loopback box, its
durable disk, and runs whose exports are sealed there (what a teardown's custody check reads)."""

from tests.custody.conftest import *  # noqa: F403 (the loopback box, sealed exports and their durable disk)
