"""Every state machine is one Transitions table: built only when every state has a row and every target
is a state, and a move outside it is one IllegalTransition naming both states."""

import pytest
from django.db import models

from core.states import IllegalTransition, Transitions
from delivery.models import TEARDOWN_TRANSITIONS, TeardownStatus
from fleet.models import INSTANCE_TRANSITIONS, InstanceState
from notifications.models import NOTIFICATION_TRANSITIONS, Notification
from runs.models import RUN_TRANSITIONS, SPEND_TRANSITIONS, RunState, SpendStatus


class Light(models.TextChoices):
    RED = "red", "Red"
    GREEN = "green", "Green"


def test_a_table_without_a_row_for_a_state_or_with_an_unknown_target_is_refused():
    with pytest.raises(ValueError, match="no row for \\['green'\\]"):
        Transitions(Light, {Light.RED: {Light.GREEN}}, "A light")
    with pytest.raises(ValueError, match="unknown \\['blue'\\]"):
        Transitions(Light, {Light.RED: {"blue"}, Light.GREEN: set()}, "A light")


def test_a_move_outside_the_table_names_both_states():
    light = Transitions(Light, {Light.RED: {Light.GREEN}, Light.GREEN: set()}, "A light")
    light.check(Light.RED, Light.GREEN)
    with pytest.raises(IllegalTransition, match="A light cannot go from Green to Red."):
        light.check(Light.GREEN, Light.RED)


@pytest.mark.parametrize(
    ("table", "states"),
    [
        (RUN_TRANSITIONS, RunState),
        (INSTANCE_TRANSITIONS, InstanceState),
        (TEARDOWN_TRANSITIONS, TeardownStatus),
        (SPEND_TRANSITIONS, SpendStatus),
        (NOTIFICATION_TRANSITIONS, Notification.State),
    ],
)
def test_every_machine_is_a_table_with_a_row_for_each_of_its_states(table, states):
    assert set(table.table) == set(states.values)
    assert all(isinstance(targets, frozenset) for targets in table.table.values())


def test_a_decided_spend_request_never_moves_again():
    for final in (SpendStatus.REJECTED, SpendStatus.EXPIRED, SpendStatus.CANCELLED):
        with pytest.raises(IllegalTransition):
            SPEND_TRANSITIONS.check(final, SpendStatus.APPROVED)
    SPEND_TRANSITIONS.check(SpendStatus.APPROVED, SpendStatus.CANCELLED)  # an unspent approval of a changed run
