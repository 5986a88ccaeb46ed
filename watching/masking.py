"""Every byte the control host keeps from a run passes the masker on the way in.

The wrapper masks what the child prints on its way to the log, but a child may write a value anywhere
the wrapper later ships: appended to its attempt's log.txt, a train.csv column name, run.json. So the
control host masks again whatever it keeps or shows from a run (log chunks, metrics and their header,
status facts, events, the live push, what custody reads back) with the values of the run's named
secrets, read from this worker's environment as the launch reads them.

A guard against accidents, not against an operator whose command receives the value: a transformed
form (base64, reversed, split across two writes that land in different chunks) is not caught.
docs/SECURITY.md says so."""

from fleet.credentials import SECRET_MIN_LENGTH, secret_value_of, secrets_named

MASK = "[secret masked]"


def values_for(run) -> list[str]:
    """The run's secret values this worker can read (a secret since revoked still masks), longest first."""
    if not run.secrets:
        return []
    found = {secret_value_of(c) for c in secrets_named(run.secrets) if not isinstance(c, str)}
    return sorted((v for v in found if len(v) >= SECRET_MIN_LENGTH), key=len, reverse=True)


def mask_text(text: str, values: list[str]) -> str:
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return text


def mask_tree(data, values: list[str]):
    """data (JSON-like: dicts, lists, strings, numbers) with every string masked, keys included."""
    if not values:
        return data
    if isinstance(data, str):
        return mask_text(data, values)
    if isinstance(data, dict):
        return {mask_tree(key, values): mask_tree(value, values) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [mask_tree(item, values) for item in data]
    return data
