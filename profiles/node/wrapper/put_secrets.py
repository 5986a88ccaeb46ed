"""`put-secrets`: the attempt's secrets, sent on stdin, into its 0600 file (run_secrets.py says where)."""

import contextlib
import json
import os
import stat

from .run_secrets import secrets_dir, secrets_path


def cmd_put_secrets(spec, request):
    """Write the values sent on stdin ({"values": {NAME: value}}) to the attempt's 0600 file."""
    values = request.get("values") if isinstance(request, dict) else None
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        print(json.dumps({"error": 'put-secrets wants {"values": {NAME: text}}'}))
        return 2
    directory = secrets_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    mine = os.lstat(directory)
    if not stat.S_ISDIR(mine.st_mode) or mine.st_uid != os.getuid():
        print(json.dumps({"error": f"{directory} is not this user's own directory: refusing to write secrets"}))
        return 2
    os.chmod(directory, 0o700)
    path = secrets_path(spec)
    staging = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.remove(staging)
    handle = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "w") as out:
        json.dump(values, out)
    os.replace(staging, path)
    # An earlier attempt's file that no attempt read (its launch failed): gone with this one's arrival.
    prefix = os.path.basename(path).rsplit("--", 1)[0] + "--"
    for name in os.listdir(directory):
        if name.startswith(prefix) and name != os.path.basename(path):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name))
    print(json.dumps({"written": sorted(values), "path": path}))
    return 0
