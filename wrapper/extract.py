"""`extract`: unpack a shipped source tarball safely into the run's src/."""

import json
import os
import shutil
import tarfile


def cmd_extract(spec):
    tarball = os.path.join(spec.active, "src.tar")
    if os.path.exists(spec.src):
        print(json.dumps({"extracted": False, "reason": "src already present"}))
        return 0
    staging = spec.src + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or member.issym() or member.islnk() or member.isdev():
                raise SystemExit(f"refusing unsafe member in source tarball: {member.name!r}")
        archive.extractall(staging)
    os.rename(staging, spec.src)
    os.remove(tarball)
    print(json.dumps({"extracted": True}))
    return 0
