"""One way to write a state machine: a table of each state and the states it may move to, checked
when it is built (every state has a row, every target is a state) and at every move."""

from django.core.exceptions import ValidationError


class IllegalTransition(ValidationError):
    """A move its state machine does not allow, or a verb refused in the current state."""


class Transitions:
    def __init__(self, states, table: dict, noun: str):
        """states: the TextChoices of the machine; noun: what moves, for the refusal ("A run")."""
        known = set(states.values)
        missing = known - set(table)
        strays = {target for targets in table.values() for target in targets} - known
        if missing or strays or set(table) - known:
            raise ValueError(f"{states.__name__} transitions: no row for {sorted(missing)}, unknown {sorted(strays)}")
        self.states, self.table, self.noun = states, {state: frozenset(t) for state, t in table.items()}, noun

    def __getitem__(self, state) -> frozenset:
        return self.table[state]

    def __iter__(self):
        return iter(self.table)

    def allows(self, source, target) -> bool:
        return target in self.table[source]

    def check(self, source, target, noun: str = "") -> None:
        """IllegalTransition naming both states unless the table allows source → target."""
        if not self.allows(source, target):
            who = noun or self.noun
            raise IllegalTransition(f"{who} cannot go from {self.states(source).label} to {self.states(target).label}.")
