"""The one dispatch table: each subcommand, and what its arguments are read from."""

import json
import sys

from .abandon import cmd_abandon
from .boot_resume import cmd_boot_resume
from .clean_caches import cmd_clean_caches
from .close_active import cmd_close_active
from .dataset_roster import cmd_dataset_roster
from .extract import cmd_extract
from .follow import follow_on_stdin
from .gpus import cmd_gpus
from .idle import cmd_idle
from .mirror import cmd_mirror
from .node import cmd_node
from .preflight import cmd_preflight
from .probe import cmd_probe
from .put_secrets import cmd_put_secrets
from .rehash import cmd_rehash
from .remove_copy import cmd_remove_copy
from .rendezvous import cmd_rendezvous
from .reseal import cmd_reseal
from .roster import cmd_roster
from .run import cmd_run
from .smoke import cmd_smoke
from .specs import load_spec
from .stage_check import cmd_stage_check
from .stage_grant import cmd_stage_grant
from .stage_pull import cmd_stage_pull
from .stage_receive import cmd_stage_receive
from .stage_send import cmd_stage_send
from .status import cmd_status
from .stop import cmd_stop

# What each argument is: SPEC, a JSON spec file named on the command line; ARG, a plain argument;
# STDIN, one JSON request read from stdin (after the command-line arguments).
SPEC, ARG, STDIN = "SPEC.json", "ARG", "< REQUEST.json"

COMMANDS = {
    "preflight": (cmd_preflight, (SPEC,)),
    "smoke": (cmd_smoke, (SPEC,)),
    "run": (cmd_run, (SPEC,)),
    "node": (cmd_node, (ARG,)),  # one node's part of a multi-node run (srun starts it on every node)
    "status": (cmd_status, (SPEC,)),
    "extract": (cmd_extract, (SPEC,)),
    "abandon": (cmd_abandon, (SPEC, STDIN)),
    "roster": (cmd_roster, (SPEC,)),
    "gpus": (cmd_gpus, (SPEC,)),
    "stop": (cmd_stop, (SPEC, STDIN)),
    "put-secrets": (cmd_put_secrets, (SPEC, STDIN)),
    "mirror": (cmd_mirror, (SPEC, ARG, ARG)),
    "idle": (cmd_idle, (ARG,)),
    "boot-resume": (cmd_boot_resume, (ARG,)),
    "probe": (cmd_probe, (STDIN,)),
    "rehash": (cmd_rehash, (STDIN,)),
    "close-active": (cmd_close_active, (STDIN,)),
    "reseal": (cmd_reseal, (SPEC,)),  # an attempt quarantined for paperwork alone, sealed on a person's word
    "clean-caches": (cmd_clean_caches, (STDIN,)),
    "remove-copy": (cmd_remove_copy, (STDIN,)),
    "rendezvous": (cmd_rendezvous, (STDIN,)),  # a run over several boxes: listen (rank 0) or connect
    "follow": (follow_on_stdin, ()),  # reads its request and then probes from stdin, line by line
    "dataset-roster": (cmd_dataset_roster, (STDIN,)),
    "stage-check": (cmd_stage_check, (STDIN,)),
    "stage-grant": (cmd_stage_grant, (STDIN,)),
    # These read a request line and then a byte stream (or write one) on their own.
    "stage-receive": (cmd_stage_receive, ()),
    "stage-send": (cmd_stage_send, (ARG,)),
    "stage-pull": (cmd_stage_pull, ()),
}


def usage():
    lines = [f"  {name} {' '.join(kinds)}" for name, (_, kinds) in COMMANDS.items()]
    return "usage: remotegpu_wrapper.py SUBCOMMAND ...\n" + "\n".join(lines) + "\n"


def main(argv):
    command = COMMANDS.get(argv[1]) if len(argv) > 1 else None
    if command is None or len(argv) - 2 != sum(kind != STDIN for kind in command[1]):
        sys.stderr.write(usage())
        return 2
    function, kinds = command
    given = iter(argv[2:])
    return function(*(_argument(kind, given) for kind in kinds))


def _argument(kind, given):
    if kind == SPEC:
        return load_spec(next(given))
    return next(given) if kind == ARG else json.load(sys.stdin)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
