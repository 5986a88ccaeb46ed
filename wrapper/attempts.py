"""Where an attempt lives on the node, and the environment its command gets."""

import os

from .distributed import distributed_env
from .helper import helper_dir
from .hooks import hook_env
from .tree import TREE_MARK


def attempt_dir(spec):
    return os.path.join(spec.active, f"attempt-{spec.attempt}")


def quarantine_dir(spec):
    return os.path.join(spec.quarantine_base, f"{spec.run_id}--{spec.attempt}")


def run_env(spec, smoke, secrets=None, hooks=None):
    """The command's environment: the box's, the platform's hooks, the run's secrets, then ours.

    Only the child gets this: the wrapper's own environment never holds a hook or a secret."""
    env = dict(os.environ)
    env.update(spec.env or {})
    env.update(hook_env(spec, env)[0] if hooks is None else hooks)
    env.update(secrets or {})
    env.update(
        {
            "REMOTEGPU_RUN_ID": spec.run_id,
            "REMOTEGPU_ATTEMPT": str(spec.attempt),
            "REMOTEGPU_CHECKPOINT_DIR": os.path.join(spec.active, "smoke", "ckpt") if smoke else spec.ckpt,
            "REMOTEGPU_OUTPUT_DIR": os.path.join(spec.active, "smoke", "output") if smoke else spec.output,
            "REMOTEGPU_SMOKE": "1" if smoke else "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if not smoke:
        env.update(distributed_env(spec))
    if spec.tree_mark:  # every process the command starts carries it: none outlives the attempt
        env[TREE_MARK] = spec.tree_mark
    helper = helper_dir()
    if helper:  # `import remotegpu_run` works in the command (docs/contract.md), its own path after it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (helper, env.get("PYTHONPATH"))))
    if smoke:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the smoke proves the code, on CPU, before paid GPU time
    elif spec.gpus is not None and spec.scheduler != "slurm":
        # Under Slurm the job's gres decides its GPUs, and Slurm sets CUDA_VISIBLE_DEVICES for them.
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu) for gpu in spec.gpus)
    return env
