"""Artifacts, custody records and teardown requests arrive with the VERIFY and DELIVER issues."""
