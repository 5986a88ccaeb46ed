"""`preflight`: prove inputs exist, hash identities, measure bytes, inodes and mounts."""

import json
import os
import shutil
import sys

from .environment import environment_report, write_speed
from .files import expand, measure, mount_of, sha256_file, tree_hash
from .gpus import gpu_holders, gpu_inventory
from .hooks import hook_env


def cmd_preflight(spec):
    missing, hashes = [], {}
    for label, path in spec.inputs:
        if not os.path.exists(expand(path)):
            missing.append({"input": label, "path": path})
    config = spec.config
    if config and os.path.isfile(expand(config)):
        hashes["config_sha256"] = sha256_file(expand(config))
    manifest = spec.manifest
    if manifest and os.path.isfile(expand(manifest)):
        hashes["manifest_sha256"] = sha256_file(expand(manifest))
    if os.path.isdir(spec.src):
        hashes["source_tree_sha256"] = tree_hash(spec.src)
        # The code without the run's config (which a sweep's cells and seeds change): what a comparison
        # holds equal between replicates.
        in_src = os.path.relpath(expand(config), expand(spec.src)).replace(os.sep, "/") if config else None
        hashes["code_sha256"] = tree_hash(spec.src, skip=(in_src,)) if in_src else hashes["source_tree_sha256"]
    report = {"missing": missing, "hashes": hashes, "space": measure(spec.run_root)}
    mirror = spec.ckpt_mirror.root
    if mirror:  # the checkpoint mirror's disk: the same as the data root's, or its own budget
        report["space"]["mirror"] = measure(expand(mirror))
    report["tmux"] = shutil.which("tmux") is not None
    report["python"] = sys.version.split()[0]
    report["write_bytes_per_second"] = write_speed(spec.run_root)
    report["environment"] = environment_report(spec)
    report["hooks"] = hook_env(spec, dict(os.environ))[1]
    if spec.gpus:
        report["gpu_holders"] = gpu_holders(spec)
        report["gpu_inventory"] = gpu_inventory()
    report["mounts"] = {"data": mount_of(spec.run_root)}
    if spec.data_tier_path:
        report["mounts"]["declared_tier"] = mount_of(spec.data_tier_path)
    print(json.dumps(report))
    return 0
