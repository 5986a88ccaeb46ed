"""python -m remotegpu launch DIR … | check-export DIR | follow RUN | logs RUN [-f] | edit RUN KEY=VALUE…
| stop RUN | retry RUN | verify RUN | custody RUN | teardown INSTANCE KIND --reason … | sweep BASE_RUN …
| sweeps | follow-sweep ID | rent PROJECT --gpu … --max-rate … --candidate … | rental ID"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from remotegpu.client import ApiError, Client

SETTLED = {"exported", "quarantined", "failed_preflight", "failed_smoke", "failed_launch"}


def follow(client: Client, run_id: str, timeout: float, out=sys.stdout) -> str:
    after, deadline = 0, time.monotonic() + timeout
    while True:
        answer = client.call("GET", f"/runs/{run_id}/events/?after={after}")
        for event in answer["events"]:
            print(f"{event['at']}  {event['kind']:<8} {event['message']}", file=out, flush=True)
            after = event["id"]
        if answer["state"] in SETTLED:
            return answer["state"]
        if time.monotonic() > deadline:
            raise ApiError(f"{run_id} still {answer['state']} after {timeout:g}s")
        time.sleep(1)


def logs(client: Client, run_id: str, attempt: int | None, follow_on: bool, timeout: float, out=sys.stdout) -> None:
    """Print the run's training log (one attempt); with follow_on, keep printing until the run settles.

    Offsets are the node's bytes of log.txt, so a poll never repeats or skips a line; when a
    relaunch starts a new attempt while following, the new attempt's log follows under a marker.
    """
    offset, deadline, printed = 0, time.monotonic() + timeout, False
    while True:
        query = f"offset={offset}" + (f"&attempt={attempt}" if attempt is not None else "")
        answer = client.call("GET", f"/runs/{run_id}/log/?{query}")
        out.write(answer["text"])
        out.flush()
        printed = printed or bool(answer["text"])
        offset = answer["next_offset"]
        if answer["more"]:
            continue
        if not follow_on:
            return
        if attempt is not None and answer["current_attempt"] != attempt:
            attempt, offset = answer["current_attempt"], 0
            if printed:  # a relaunch, not the first launch of a run followed from its draft
                print(f"--- attempt {attempt} ---", file=out, flush=True)
            continue
        if answer["state"] in SETTLED:
            return
        if time.monotonic() > deadline:
            raise ApiError(f"{run_id} still {answer['state']} after {timeout:g}s")
        attempt = answer["attempt"]
        time.sleep(1)


def launch(client: Client, args) -> str:
    body = {
        "project": args.project,
        "instance": args.instance,
        "title": args.title,
        "source_kind": "local_dir",
        "source_path": str(Path(args.directory).resolve()),
        "command": args.command,
        "config_path": args.config,
        "gpus": args.gpus,
        "expected_minutes": args.expected_minutes,
        "environment": args.environment,
        "config_overrides": "\n".join(args.config_override),
        "capsule": args.capsule,
        "datasets": args.dataset,
        "secrets": args.secret,
        "secrets_in_smoke": args.secrets_in_smoke,
        # The no-edit path: KEY=VALUE as the form's `key: value` lines (a value may hold '=' or ':').
        "trainer_files": "\n".join(": ".join(item.split("=", 1)) for item in args.trainer_file),
    }
    run = client.call("POST", "/runs/", body)
    print(f"created {run['run_id']} ({client.site}/runs/{run['run_id']}/)", flush=True)
    client.call("POST", f"/runs/{run['run_id']}/launch/", {})
    return run["run_id"]


def explain_failure(client: Client, run_id: str, out=sys.stderr) -> None:
    """Why a run failed, as the run page says it: the class, and the tail of what it printed."""
    run = client.call("GET", f"/runs/{run_id}/")
    if run.get("failure_class"):
        print(f"failure: {run['failure_class']}", file=out)
    tail = run.get("failure_excerpt") or (run.get("smoke_output") if run["state"] == "failed_smoke" else "")
    if tail:
        print("last lines:", file=out)
        for line in tail.strip().splitlines()[-20:]:
            print(f"  {line}", file=out)
    print(f"see {client.site}/runs/{run_id}/", file=out)


def edits(pairs: list[str]) -> dict:
    """KEY=VALUE pairs of a run's fields; a value is JSON where it parses (30, ["python3", "t.py"]), else text."""
    body = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ApiError(f"not KEY=VALUE: {pair!r}")
        try:
            body[key] = json.loads(value)
        except ValueError:
            body[key] = value
    return body


def rent_body(args) -> dict:
    """The API's rent from the command line; --candidate PROVIDER=KEY keeps the order they are asked in."""
    pairs = [candidate.partition("=") for candidate in args.candidate]
    if any(not provider or not key for provider, _, key in pairs):
        raise ApiError("--candidate is PROVIDER=API_KEY_NAME, e.g. vastai=team-vast")
    body = {"project": args.project, "purpose": args.purpose, "gpu_models": args.gpu, "gpu_count": args.gpus}
    body.update(gpu_memory_gb=args.gpu_memory, disk_gb=args.disk, max_rate=args.max_rate, ssh_key=args.ssh_key)
    body.update(candidates=[provider for provider, _, _ in pairs], api_keys={p: key for p, _, key in pairs})
    body.update(expected_minutes=args.minutes, run=args.run, acknowledge=args.acknowledge)
    body.update(proving_box=args.prove_on, region=args.region, durable_volume=args.volume, volume_gb=args.volume_gb)
    if args.image:
        body["image"] = args.image
    return body


def follow_sweep(client: Client, sweep_id: str, timeout: float, out=sys.stdout) -> dict:
    """Print each cell's state as it changes until every cell has settled; the states at the end."""
    seen, deadline = {}, time.monotonic() + timeout
    while True:
        sweep = client.call("GET", f"/sweeps/{sweep_id}/")
        for cell in sweep["cells"]:
            if seen.get(cell["run_id"]) != cell["state"]:
                seen[cell["run_id"]] = cell["state"]
                print(f"cell {cell['cell']} {cell['run_id']}: {cell['state']}", file=out, flush=True)
        if sweep["cells"] and all(cell["state"] in SETTLED for cell in sweep["cells"]):
            return seen
        if time.monotonic() > deadline:
            raise ApiError(f"sweep {sweep_id} still running after {timeout:g}s")
        time.sleep(1)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m remotegpu", description=__doc__)
    sub = top.add_subparsers(dest="verb", required=True)
    for add in (_launch_verb, _run_verbs, _teardown_verb, _sweep_verbs, _rent_verbs):
        add(sub)
    return top


def _launch_verb(sub) -> None:
    start = sub.add_parser("launch", help="create a run from a directory, launch it and follow it (-- COMMAND…)")
    start.add_argument("directory")
    start.add_argument("--project", required=True)
    start.add_argument("--instance", required=True)
    start.add_argument("--config", default="config.yaml")
    start.add_argument("--title", default="")
    start.add_argument("--gpus", type=lambda text: [int(x) for x in text.split(",") if x], default=[])
    start.add_argument("--expected-minutes", type=int, default=60)
    start.add_argument("--environment", default="", help="the interpreter or environment the command runs in")
    start.add_argument(
        "--config-override", action="append", default=[], metavar="KEY=VALUE", help="repeatable, e.g. lr=0.01"
    )
    start.add_argument(
        "--capsule",
        choices=["software", "hardware"],
        default="software",
        help="hardware: a weight-free capsule sealed under export/hardware/ (examples/tinyfit/capture.py)",
    )
    start.add_argument("--dataset", action="append", default=[], help="repeatable: a registered dataset's name")
    start.add_argument("--secret", action="append", default=[], help="repeatable: a run secret granted to the project")
    start.add_argument("--secrets-in-smoke", action="store_true", help="the CPU smoke gets the secrets too")
    start.add_argument(
        "--trainer-file",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="repeatable, the no-edit path (docs/contract.md): e.g. checkpoints=out/ckpt.pt",
    )
    start.add_argument("--no-follow", action="store_true")
    start.add_argument("--timeout", type=float, default=24 * 3600)
    check = sub.add_parser(
        "check-export", help="check a local export directory against the run contract (docs/contract.md), offline"
    )
    check.add_argument("directory")
    check.add_argument(
        "--tolerance", type=float, default=1e-6, help="how far a claimed metric may be from its recompute"
    )


def _run_verbs(sub) -> None:
    for verb in ("follow", "verify", "custody", "logs", "stop", "retry"):
        one = sub.add_parser(verb)
        one.add_argument("run_id")
        one.add_argument("--timeout", type=float, default=24 * 3600)
    edit = sub.add_parser("edit", help="change a draft run's fields: KEY=VALUE (values as JSON or text)")
    edit.add_argument("run_id")
    edit.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    reading = sub.choices["logs"]
    reading.add_argument("-f", "--follow", action="store_true", help="keep printing until the run settles")
    reading.add_argument("--attempt", type=int, help="an earlier attempt (default: the current one)")


def _teardown_verb(sub) -> None:
    teardown = sub.add_parser("teardown", help="request a consequence (an approver decides it on the page)")
    teardown.add_argument("instance")
    teardown.add_argument("kind", choices=["shutdown", "release", "delete_evidence"])
    teardown.add_argument("--reason", required=True)
    teardown.add_argument("--run", default="", help="delete_evidence: the run whose copy goes")
    teardown.add_argument("--location", default="", help="delete_evidence: node, custody or mirror")


def _sweep_verbs(sub) -> None:
    sweep = sub.add_parser("sweep", help="a sweep from a base run: one cell per mapping of config keys")
    sweep.add_argument("base_run")
    sweep.add_argument("--name", required=True)
    sweep.add_argument("--cells", required=True, help='JSON, e.g. [{"lr": 0.1}, {"lr": 0.01}]')
    sweep.add_argument("--instance", action="append", required=True, help="repeatable: boxes to spread cells over")
    sweep.add_argument("--gpus-per-box", type=int, default=1)
    sweep.add_argument("--one-at-a-time", action="store_true")
    sub.add_parser("sweeps", help="the sweeps you can see")
    follow_one = sub.add_parser("follow-sweep", help="print each cell's state until every cell has settled")
    follow_one.add_argument("sweep_id")
    follow_one.add_argument("--timeout", type=float, default=24 * 3600)


def _rent_verbs(sub) -> None:
    rent = sub.add_parser("rent", help="ask for a box by constraint (another person approves its spend on the page)")
    rent.add_argument("project")
    rent.add_argument("--purpose", default="train")
    rent.add_argument("--gpu", action="append", required=True, help="repeatable: any of these GPU models")
    rent.add_argument("--gpus", type=int, default=1)
    rent.add_argument("--gpu-memory", type=int, default=0, help="GB per GPU, at least")
    rent.add_argument("--disk", type=int, default=50, help="GB")
    rent.add_argument("--max-rate", required=True, help="$/h for the whole box")
    rent.add_argument("--candidate", action="append", required=True, help="repeatable, in order: PROVIDER=API_KEY")
    rent.add_argument("--ssh-key", required=True, help="the SSH key credential's name")
    rent.add_argument("--minutes", type=int, required=True, help="the run's expected minutes")
    rent.add_argument("--run", default="", help="a draft run that continues into its preflight on the box")
    rent.add_argument("--prove-on", default="", help="with --run: the box its checks and CPU smoke pass on first")
    rent.add_argument("--region", default="", help="only offers in this region")
    rent.add_argument("--volume", default="", help="a RunPod network volume or Lambda filesystem to attach")
    rent.add_argument("--volume-gb", type=int, default=0, help="create --volume this large where none is listed")
    rent.add_argument("--image", default="", help="the image, best pinned as name@sha256:<digest>")
    rent.add_argument("--acknowledge", action="store_true", help="I have read the platforms' danger clocks")
    sub.add_parser("rental", help="a rent's state and each candidate asked").add_argument("rental_id")


def _launch(client, args) -> int:
    args.command = args.command or ["python3", "train.py"]
    run_id = launch(client, args)
    state = "launched" if args.no_follow else follow(client, run_id, args.timeout)
    print(f"{run_id}: {state}")
    if state not in ("launched", "exported"):
        explain_failure(client, run_id)
        return 1
    return 0


def _follow(client, args) -> int:
    state = follow(client, args.run_id, args.timeout)
    print(f"{args.run_id}: {state}")
    if state != "exported":  # every failed state says why: its class and the tail it printed
        explain_failure(client, args.run_id)
        return 1
    return 0


def _logs(client, args) -> int:
    logs(client, args.run_id, args.attempt, args.follow, args.timeout)
    return 0


def _edit(client, args) -> int:
    run = client.call("PATCH", f"/runs/{args.run_id}/", edits(args.pairs))
    print(f"{args.run_id}: changed {', '.join(run['changed']) or 'nothing'}")
    return 0


def _teardown(client, args) -> int:
    body = {"instance": args.instance, "kind": args.kind, "reason": args.reason}
    made = client.call("POST", "/teardown/", {**body, "run": args.run, "location": args.location})
    print(f"request #{made['id']}: {made['kind']} of {made['instance']}, {made['status']} ({made['level']})")
    return 0


def _sweep(client, args) -> int:
    try:
        cells = json.loads(args.cells)
    except ValueError as exc:
        raise ApiError(f"--cells is not JSON: {exc}") from None
    body = {"name": args.name, "base_run": args.base_run, "cells": cells, "instances": args.instance}
    body.update(gpus_per_box=args.gpus_per_box, independent=not args.one_at_a_time)
    made = client.call("POST", "/sweeps/", body)
    print(f"sweep {made['id']} {made['name']}: {len(made['cells'])} cells ({client.site}/sweeps/{made['id']}/)")
    return 0


def _sweeps(client, args) -> int:
    for sweep in client.call("GET", "/sweeps/").get("results", []):
        states = [cell["state"] for cell in sweep["cells"]]
        print(f"{sweep['id']}\t{sweep['name']}\t{sweep['project']}\t{len(states)} cells\t{', '.join(states)}")
    return 0


def _follow_sweep(client, args) -> int:
    states = follow_sweep(client, args.sweep_id, args.timeout)
    failed = [run_id for run_id, state in states.items() if state != "exported"]
    print(f"sweep {args.sweep_id}: {len(states) - len(failed)} exported, {len(failed)} not")
    for run_id in failed:
        explain_failure(client, run_id)
    return 1 if failed else 0


def _rent(client, args) -> int:
    made = client.call("POST", "/rentals/", rent_body(args))
    where = f"{client.site}/rentals/{made['id']}/"
    cost = f"at most ${made['expected_cost']}, {made['spend_note']}"
    print(f"rent #{made['id']} {made['name']}: {made['state']}, {cost} ({where})")
    return 0


def _rental(client, args) -> int:
    made = client.call("GET", f"/rentals/{args.rental_id}/")
    print(f"rent #{made['id']} {made['name']}: {made['state']} {made['reason']}".rstrip())
    for one in made["attempts"]:
        print(f"  {one['provider']}\t{one['outcome']}\t{one['provider_id']} {one['detail']}".rstrip())
    return 0


def _stop_or_retry(client, args) -> int:
    run = client.call("POST", f"/runs/{args.run_id}/{args.verb}/", {})
    print(f"{args.run_id}: {args.verb} asked (state {run['state']}, attempt {run['attempt']})")
    return 0


def _verify(client, args) -> int:
    print(json.dumps(client.call("POST", f"/runs/{args.run_id}/verify/", {}), indent=2))
    return 0


def _custody(client, args) -> int:
    print(json.dumps(client.call("GET", f"/runs/{args.run_id}/custody/"), indent=2))
    return 0


def _check_export(_client, args) -> int:
    """Offline: the client is never called (no server, no token)."""
    from remotegpu.check_export import main as check_export

    return check_export(Path(args.directory), args.tolerance)


VERBS = {
    "launch": _launch,
    "check-export": _check_export,
    "follow": _follow,
    "logs": _logs,
    "edit": _edit,
    "teardown": _teardown,
    "sweep": _sweep,
    "sweeps": _sweeps,
    "follow-sweep": _follow_sweep,
    "rent": _rent,
    "rental": _rental,
    "stop": _stop_or_retry,
    "retry": _stop_or_retry,
    "verify": _verify,
    "custody": _custody,
}


OFFLINE = {"check-export"}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []  # the training command, verbatim
    args = parser().parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.command = command
    try:
        client = None  # an offline verb needs no server and no token
        if args.verb not in OFFLINE:
            client = Client(
                os.environ.get("REMOTEGPU_URL", "http://127.0.0.1:8000"), os.environ.get("REMOTEGPU_TOKEN", "")
            )
        return VERBS[args.verb](client, args)
    except ApiError as exc:
        print(f"remotegpu: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
