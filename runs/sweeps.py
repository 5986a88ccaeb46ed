"""Sweeps, the pure part: parse the cells, merge a cell into the base config, plan who runs where.

Independent cells run in parallel, one per free GPU across the chosen boxes; the rest wait in
a per-box queue in cell order. One writer per GPU always holds (GpuLock enforces it as well).
"""

import json
import re

import yaml

MAX_CELLS = 200


class SweepError(ValueError):
    pass


def parse_cells(text: str, base_config: dict) -> list[dict]:
    """A YAML or JSON list of mappings; every key must already be in the base config."""
    try:
        cells = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SweepError(f"The overrides are not valid YAML or JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(cells, list) or not cells:
        raise SweepError("Give a non-empty list of cells, e.g. [{lr: 0.1}, {lr: 0.01}].")
    if len(cells) > MAX_CELLS:
        raise SweepError(f"At most {MAX_CELLS} cells per sweep.")
    seen = {}
    cells = [_whole_text(f"Cell {index}", cell) for index, cell in enumerate(cells, start=1)]
    for index, cell in enumerate(cells, start=1):
        _check_overrides(f"Cell {index}", cell, base_config)
        key = json.dumps(cell, sort_keys=True, default=str)
        if key in seen:
            raise SweepError(f"Cell {index} duplicates cell {seen[key]}: each cell must differ.")
        seen[key] = index
    return cells


SEED_KEYS = ("seed", "random_seed")
MAX_SEEDS = 20


def replicate(cells: list[dict], seeds: int, base_config: dict) -> list[dict]:
    """Each cell run with `seeds` seeds: the base config's seed, then the next ones (base + 1, …), each
    replicate its own run. Replicates vary the seed only: a cell that sets the seed itself is refused."""
    if seeds == 1:
        return cells
    if not 1 <= seeds <= MAX_SEEDS:
        raise SweepError(f"Between 1 and {MAX_SEEDS} seeds per cell.")
    key = next((key for key in SEED_KEYS if isinstance(base_config.get(key), int)), None)
    if key is None:
        raise SweepError("Replicates need an integer seed in the base config (seed or random_seed).")
    for index, cell in enumerate(cells, start=1):
        if key in cell:
            raise SweepError(f"Cell {index} sets {key}: replicates choose the seeds.")
    if len(cells) * seeds > MAX_CELLS:
        raise SweepError(f"At most {MAX_CELLS} runs per sweep ({len(cells)} cells × {seeds} seeds).")
    return [{**cell, key: base_config[key] + offset} for cell in cells for offset in range(seeds)]


def _whole(text: str, what: str) -> str:
    """text with its escaped surrogate pairs joined (YAML reads "\\ud83d\\ude00" as two halves of 😀): a
    lone half cannot be stored, rendered or sent to a box, so it is refused."""
    try:
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        raise SweepError(f"{what}: a key or value holds a lone surrogate (\\ud800-\\udfff), not text.") from None


def _whole_text(what: str, overrides):
    """The overrides with every key and string value whole text (see _whole); anything else as it is."""
    if not isinstance(overrides, dict):
        return overrides
    return {
        _whole(key, what) if isinstance(key, str) else key: _whole(value, what) if isinstance(value, str) else value
        for key, value in overrides.items()
    }


def _check_overrides(what: str, overrides, base_config: dict) -> None:
    if not isinstance(overrides, dict) or not overrides:
        raise SweepError(f"{what}: not a mapping of config keys to values (write key=value).")
    unknown = sorted(str(key) for key in overrides if key not in base_config)
    if unknown:
        raise SweepError(f"{what}: unknown config key(s) {', '.join(unknown)} (not in the base config).")
    if any(isinstance(value, dict | list) for value in overrides.values()):
        raise SweepError(f"{what}: override scalar values only.")


def _scalar(text: str):
    """'0.01' → 0.01, 'true' → True, 'adam' → 'adam': what the value means in YAML, if a scalar."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if isinstance(value, dict | list) or value is None else value


def parse_overrides(value, base_config: dict) -> dict:
    """One run's overrides: a mapping, or key=value lines, or YAML/JSON text; keys must be in the config."""
    if isinstance(value, str):
        lines = [line for line in value.splitlines() if line.strip()]
        if lines and all("=" in line and not line.lstrip().startswith(("{", "-")) for line in lines):
            value = {}
            for line in lines:
                key, _, text = line.partition("=")
                value[key.strip()] = _scalar(text.strip())
        else:
            try:
                value = yaml.safe_load("\n".join(lines)) if lines else {}
            except yaml.YAMLError as exc:
                raise SweepError(
                    f"The overrides are not key=value lines, YAML or JSON: {str(exc).splitlines()[0]}"
                ) from None
    if value == {}:
        return {}
    value = _whole_text("The overrides", value)
    _check_overrides("The overrides", value, base_config)
    return value


def overrides_text(overrides: dict) -> str:
    """The key=value lines a form shows for overrides (parse_overrides reads them back as they were)."""

    def shown(value) -> str:
        ambiguous = isinstance(value, str) and _scalar(value) != value  # "true", "1e-3" kept as text
        return json.dumps(value) if ambiguous else str(value)

    return "\n".join(f"{key}={shown(value)}" for key, value in overrides.items())


# A top-level `key: value` line, its comment kept apart (a value never holds " #" in the configs we edit).
SCALAR_LINE = re.compile(r"^(?P<key>[A-Za-z_][\w.-]*)(?P<sep>[ \t]*:[ \t]*)(?P<value>.*?)(?P<rest>[ \t]+#.*)?\Z")


def merged_config(base_text: str, overrides: dict) -> str:
    """The user's config with each override written into its own line, everything else byte for byte
    (comments, order, literals such as `False`); a key the file lacks is appended. The result reads back
    as the base with the overrides, or SweepError: the trainer's own parser gets the file it knows."""
    config = yaml.safe_load(base_text) or {}
    if not isinstance(config, dict):
        raise SweepError("The base config is not a mapping.")
    lines, written = base_text.splitlines(keepends=True), set()
    for index, line in enumerate(lines):
        match = SCALAR_LINE.match(line.rstrip("\r\n"))
        if not match or match["key"] not in overrides or match["key"] in written:
            continue
        if not match["value"].strip() and _block_follows(lines, index):
            raise SweepError(f"{match['key']} holds a block in the config: only a one-line value can be overridden.")
        value = _literal(overrides[match["key"]], match["value"].strip())
        ending = line[len(line.rstrip("\r\n")) :] or "\n"
        lines[index] = f"{match['key']}{match['sep']}{value}{match['rest'] or ''}{ending}"
        written.add(match["key"])
    text = "".join(lines)
    added = [key for key in overrides if key not in written]
    if added:
        text += ("" if not text or text.endswith("\n") else "\n") + "".join(
            f"{key}: {_literal(overrides[key], '')}\n" for key in added
        )
    if yaml.safe_load(text) != {**config, **overrides}:
        raise SweepError("The overrides could not be written into the config's own lines.")
    return text


def _block_follows(lines: list[str], index: int) -> bool:
    following = next((line for line in lines[index + 1 :] if line.strip() and not line.lstrip().startswith("#")), "")
    return following.startswith((" ", "\t", "-"))


def _literal(value, was: str) -> str:
    """value as a one-line YAML scalar, in the style the file used for it (True/False stays capitalised)."""
    if isinstance(value, bool) and was in ("True", "False", "TRUE", "FALSE"):
        return str(value) if was[1:].islower() else str(value).upper()
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()


def assign_boxes(cell_count: int, box_ids: list[int]) -> list[int]:
    """Round-robin: cell i goes to box i mod n, so each box's queue is the cells in order."""
    return [box_ids[index % len(box_ids)] for index in range(cell_count)]


def plan_starts(queued: list[tuple[int, int]], busy: dict[int, set[int]], slots: int) -> list[tuple[int, int]]:
    """(cell run pk, gpu index) to start now: queued cells in order, each on a free GPU of its box.

    queued: (run pk, box id) in cell order; busy: box id → GPU indices held by live cells.
    """
    taken = {box: set(gpus) for box, gpus in busy.items()}
    starts = []
    for run_pk, box in queued:
        free = [gpu for gpu in range(slots) if gpu not in taken.setdefault(box, set())]
        if free:
            taken[box].add(free[0])
            starts.append((run_pk, free[0]))
    return starts
