"""Every provider's stand-in is built from that provider's published schema module: each route it answers
has the schema its answers are checked against (tests/provider_stub.py refuses any other answer)."""

import pytest

from tests.provider_stub import PROVIDERS


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda provider: provider.name)
def test_each_stand_in_checks_every_answer_against_its_providers_schema(provider):
    assert (
        provider.schemas is not None
        and provider.schemas.__name__ == f"providers.{provider.name.replace('lambda', 'lambdalabs')}.schema"
    )
    checked = set(provider.schemas.ANSWERS)
    unchecked = [
        verb
        for _, _, verb in provider.routes
        if provider.answer_of.get(verb) not in checked and verb not in provider.no_content
    ]
    assert unchecked == []
    assert "error" in provider.schemas.ANSWERS  # its errors too
