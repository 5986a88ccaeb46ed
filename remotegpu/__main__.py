"""python -m remotegpu launch DIR … | follow RUN | logs RUN [-f] | stop RUN | retry RUN | verify RUN | custody RUN"""

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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m remotegpu", description=__doc__)
    sub = top.add_subparsers(dest="verb", required=True)
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
    start.add_argument("--no-follow", action="store_true")
    start.add_argument("--timeout", type=float, default=24 * 3600)
    for verb in ("follow", "verify", "custody", "logs", "stop", "retry"):
        one = sub.add_parser(verb)
        one.add_argument("run_id")
        one.add_argument("--timeout", type=float, default=24 * 3600)
    reading = sub.choices["logs"]
    reading.add_argument("-f", "--follow", action="store_true", help="keep printing until the run settles")
    reading.add_argument("--attempt", type=int, help="an earlier attempt (default: the current one)")
    return top


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []  # the training command, verbatim
    args = parser().parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    args.command = command
    try:
        client = Client(os.environ.get("REMOTEGPU_URL", "http://127.0.0.1:8000"), os.environ.get("REMOTEGPU_TOKEN", ""))
        if args.verb == "launch":
            args.command = args.command or ["python3", "train.py"]
            run_id = launch(client, args)
            state = "launched" if args.no_follow else follow(client, run_id, args.timeout)
            print(f"{run_id}: {state}")
            if state not in ("launched", "exported"):
                explain_failure(client, run_id)
                return 1
            return 0
        if args.verb == "follow":
            state = follow(client, args.run_id, args.timeout)
            print(f"{args.run_id}: {state}")
            if state != "exported":  # every failed state says why: its class and the tail it printed
                explain_failure(client, args.run_id)
                return 1
        elif args.verb == "logs":
            logs(client, args.run_id, args.attempt, args.follow, args.timeout)
        elif args.verb in ("stop", "retry"):
            run = client.call("POST", f"/runs/{args.run_id}/{args.verb}/", {})
            print(f"{args.run_id}: {args.verb} asked (state {run['state']}, attempt {run['attempt']})")
        elif args.verb == "verify":
            print(json.dumps(client.call("POST", f"/runs/{args.run_id}/verify/", {}), indent=2))
        else:
            print(json.dumps(client.call("GET", f"/runs/{args.run_id}/custody/"), indent=2))
    except ApiError as exc:
        print(f"remotegpu: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
