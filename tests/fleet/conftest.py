"""Profile tests share the runs tests' project (its members in their persona roles)."""

from tests.runs.conftest import project  # noqa: F401
