"""A whole spec (wrapper/contract.py) for tests that call the wrapper's subcommands directly: every key the
strict reader requires, at the values a plain one-box run on this machine gets; a test changes what it is
about."""

import sys


def spec_data(layout, **changes) -> dict:
    data = {
        **layout.as_dict(),
        "run_id": layout.run_id,
        "attempt": 1,
        "scheduler": None,
        "distributed": None,
        "argv": [sys.executable, "-c", "print('smoke ok')"],
        "cwd": layout.src,
        "env": {},
        "secrets": [],
        "hooks": {},
        "gpus": [],
        "gpus_at_preflight": None,
        "environment": "",
        "inputs": [["config", layout.under_src("config.yaml")]],
        "config": layout.under_src("config.yaml"),
        "manifest": None,
        "heartbeat_seconds": 10,
        "stop_grace_seconds": 30,
        "boot_marker": f"{layout.run_root}/.remotegpu-boot",
        "smoke_timeout": 30,
        "data_tier_path": None,
        "ckpt_mirror": {
            "root": None,
            "target": None,
            "keep": 2,
            "poll_seconds": 5,
            "hold_seconds": 60,
            "step_key": None,
        },
        "restore": None,
        "dataset_files": {},
        "trainer_files": None,
        "capsule": "software",
        "boot_relaunch": None,
    }
    return data | changes


def spec_with(wrapper, **fields):
    """A whole spec as the wrapper module reads it, with these fields (the rest a plain run's, under a
    layout nobody uses): for a test of one subcommand's rule that names only what the rule reads."""
    from platforms.layout import NodeLayout  # noqa: PLC0415

    layout = NodeLayout("/nonexistent-remotegpu-root", "p", str(fields.get("run_id", "r1")), "")
    data = spec_data(layout)
    if isinstance(fields.get("ckpt_mirror"), dict):  # a test names the parts of the mirror it is about
        fields["ckpt_mirror"] = data["ckpt_mirror"] | fields["ckpt_mirror"]
    return wrapper.spec_of(data | fields)
