"""Preflight's write probe measures the run root's disk with a file of its own: two runs of one project
preflighting at once shared one name, and one removed the other's probe mid-write (a failed preflight,
seen in the full suite when three runs started together)."""

import subprocess
import sys

from node.build import wrapper_file

PROBE = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('w', sys.argv[1])\n"
    "w = importlib.util.module_from_spec(spec); spec.loader.exec_module(w)\n"
    "for _ in range(20):\n"
    "    assert w.write_speed(sys.argv[2], size=2 << 20) > 0\n"
)


def test_preflights_of_one_project_at_once_each_measure_their_own_probe(tmp_path):
    probes = [
        subprocess.Popen([sys.executable, "-c", PROBE, str(wrapper_file()), str(tmp_path)], stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    failures = [process.communicate(timeout=120)[1].decode()[-300:] for process in probes if process.wait(120) != 0]
    assert failures == []
    assert list(tmp_path.iterdir()) == []  # each removed its own probe
