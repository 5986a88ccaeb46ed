"""Before a run's job is submitted: what the cluster is (its partitions), whether it would take the job as
asked (`sbatch --test-only`), and what the job will find on its compute nodes (a probe run there by srun:
Python, torch, CUDA, the data root, the rendezvous between nodes), each answer read as untrusted. Pure: the
fleet's node client runs the commands (fleet/slurm_jobs.py)."""

import json
from pathlib import Path

from node.slurm import PARTITION, JobOptions, asked, interface_name


def partitions_argv() -> list[str]:
    return ["sinfo", "-h", "-o", "%P"]


def read_partitions(stdout: str) -> list[str]:
    """The cluster's partitions as sinfo lists them (the default one marked with '*', unmarked here)."""
    names = [line.strip().rstrip("*") for line in stdout.splitlines()[:200]]
    return [name for name in names if PARTITION.fullmatch(name)]


def request_argv(options: JobOptions) -> list[str]:
    """sbatch --test-only: whether the cluster would accept the job as asked, and when; nothing submitted."""
    return ["sbatch", "--test-only", "--job-name=rgpu-preflight", *asked(options), "--wrap=true"]


# Run by srun on one compute node, or on every node of a multi-node run (one task each): what the job will
# find there. The login node's storage is not the compute node's: the data root must be there too, and
# never under the job's $TMPDIR (gone with the job). Over several nodes, the rendezvous is measured: the
# first node listens on the port asked, the others connect to its address as the scheduler gives it.
# How the probe names the interface its rendezvous went through: the wrapper's own code, sent along.
INTERFACES = (Path(__file__).parents[1] / "wrapper" / "interfaces.py").read_text()
COMPUTE_PROBE = """
import json, os, re, socket, subprocess, sys, time
root, port = sys.argv[1], int(sys.argv[2])
node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
found = {"host": node[:100], "python": sys.version.split()[0], "root": os.path.isdir(root)}
found["rank"] = int(os.environ.get("SLURM_PROCID") or 0)
try:
    import torch
    found["torch"] = torch.__version__
    found["cuda"] = bool(torch.cuda.is_available())
except Exception as exc:
    found["torch_error"] = f"{type(exc).__name__}: {exc}"[:300]
tmp = os.environ.get("TMPDIR") or ""
real = os.path.realpath(root)
found["under_tmpdir"] = bool(tmp) and (real + "/").startswith(os.path.realpath(tmp).rstrip("/") + "/")
def scontrol(*args):
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30).stdout
if port:
    world = int(os.environ.get("SLURM_NTASKS") or 1)
    first = (scontrol("show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", "")).split() or [node])[0]
    shown = re.search(r"NodeAddr=(\\S+)", scontrol("show", "node", first, "-o"))
    endpoint = (shown.group(1) if shown else first, port)
    deadline = time.monotonic() + 20
    if found["rank"] == 0:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("", port))
        server.listen(64)
        server.settimeout(1)
        reached, ifname = 0, ""
        while reached < world - 1 and time.monotonic() < deadline:
            try:
                peer = server.accept()[0]
            except OSError:
                continue
            ifname = ifname or interface_of_socket(peer)
            peer.close()
            reached += 1
        found["rendezvous"] = {"endpoint": "%s:%d" % endpoint, "reached_by": reached, "of": world - 1}
    else:
        reached, ifname = False, ""
        while not reached and time.monotonic() < deadline:
            try:
                with socket.create_connection(endpoint, timeout=2) as connected:
                    ifname, reached = interface_of_socket(connected), True
            except OSError:
                time.sleep(0.2)
        found["rendezvous"] = {"endpoint": "%s:%d" % endpoint, "reached": reached}
    found["rendezvous"]["ifname"] = ifname
print(json.dumps(found), flush=True)
"""


def compute_argv(options: JobOptions, python: str, root: str, seconds: int, port: int = 0) -> list[str]:
    """srun of the probe above on one compute node of the run's partition (every node of a multi-node
    run, one task each), given up when no node is free within `seconds` (--immediate: a busy cluster
    makes the preflight say so, not hang). port: where the rendezvous is measured (multi-node only)."""
    nodes = max(1, int(options.nodes))
    argv = ["srun", "--job-name=rgpu-preflight", f"-N{nodes}", f"-n{nodes}", f"--immediate={int(seconds)}"]
    argv.append("--time=2")
    if options.partition:
        argv.append(f"--partition={options.partition}")
    return [*argv, python, "-c", INTERFACES + COMPUTE_PROBE, root, str(int(port) if nodes > 1 else 0)]


def read_compute(stdout: str) -> dict | None:
    """The first compute node's answer (a one-node run's), checked; None when there is none."""
    answers = read_computes(stdout)
    return answers[0] if answers else None


def read_computes(stdout: str, most: int = 64) -> list[dict]:
    """Every node's answer, checked (bounded strings, flags and numbers only), by rank."""
    answers = []
    for line in stdout.strip().splitlines()[: most * 4]:
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            answers.append(_checked_answer(found))
    return sorted(answers, key=lambda answer: answer.get("rank", 0))[:most]


def _checked_answer(found: dict) -> dict:
    keys = {"host": str, "python": str, "root": bool, "torch": str, "cuda": bool, "torch_error": str}
    keys |= {"under_tmpdir": bool, "rank": int}
    answer = {
        key: found[key][:300] if kind is str else found[key]
        for key, kind in keys.items()
        if isinstance(found.get(key), kind)
    }
    meeting = found.get("rendezvous")
    if isinstance(meeting, dict):
        answer["rendezvous"] = {
            key: meeting[key] if not isinstance(meeting[key], str) else meeting[key][:120]
            for key in ("endpoint", "reached", "reached_by", "of")
            if isinstance(meeting.get(key), str | int | bool)
        }
        if interface_name(meeting.get("ifname")):
            answer["rendezvous"]["ifname"] = meeting["ifname"]
    return answer


def nodes_problems(answers: list[dict], options: JobOptions) -> list[str]:
    """A multi-node run's nodes: all answered, one environment (python, torch, CUDA), and each reached the
    rendezvous endpoint. A difference fails closed: ranks on different builds fail far from the cause."""
    if options.nodes <= 1:
        return []
    if len(answers) < options.nodes:
        return [f"Slurm: only {len(answers)} of {options.nodes} nodes answered the preflight"]
    seen = {}
    for answer in answers:
        identity = f"python {answer.get('python', '?')}, torch {answer.get('torch', 'missing')}"
        identity += f", cuda {answer.get('cuda')}"
        seen.setdefault(identity, []).append(answer.get("host", "?"))
    problems = []
    if len(seen) > 1:
        said = "; ".join(f"{', '.join(hosts)}: {identity}" for identity, hosts in seen.items())
        problems.append(f"Slurm: the nodes' environments differ ({said}); a multi-node run needs one")
    for answer in answers:
        meeting = answer.get("rendezvous") or {}
        if answer.get("rank") == 0 and meeting.get("reached_by") != meeting.get("of"):
            problems.append(
                f"Slurm: {meeting.get('reached_by', 0)} of {meeting.get('of', '?')} nodes reached the rendezvous "
                f"endpoint {meeting.get('endpoint', '?')} on {answer.get('host', '?')} within 20 s"
            )
        elif answer.get("rank", 0) > 0 and meeting.get("reached") is not True:
            problems.append(
                f"Slurm: node {answer.get('host', '?')} could not reach the rendezvous endpoint "
                f"{meeting.get('endpoint', '?')} within 20 s"
            )
    return problems


def compute_problems(found: dict | None, needs_torch: bool) -> list[str]:
    if found is None:
        return ["Slurm: the compute node's answer was unreadable"]
    problems = []
    if not found.get("root"):
        problems.append("Slurm: the data root is not on the compute node's storage (the login node's is not theirs)")
    if found.get("under_tmpdir"):
        problems.append("Slurm: the data root is under the job's $TMPDIR on the compute node: gone with the job")
    if needs_torch and "torch" not in found:
        problems.append(f"Slurm: torch does not import on the compute node ({found.get('torch_error', 'not found')})")
    return problems
