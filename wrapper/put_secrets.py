"""`put-secrets`: the attempt's secrets, sent on stdin, into its 0600 file (run_secrets.py says where)."""

import contextlib
import json
import os

from .run_secrets import NotPrivate, private_dir, secrets_path, write_private


def cmd_put_secrets(spec, request):
    """Write the values sent on stdin ({"values": {NAME: value}}) to the attempt's 0600 file."""
    values = request.get("values") if isinstance(request, dict) else None
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        print(json.dumps({"error": 'put-secrets wants {"values": {NAME: text}}'}))
        return 2
    try:
        directory = private_dir()
    except NotPrivate as exc:
        print(json.dumps({"error": str(exc)}))
        return 2
    path = write_private(secrets_path(spec), json.dumps(values))
    # An earlier attempt's file that no attempt read (its launch failed): gone with this one's arrival.
    prefix = os.path.basename(path).rsplit("--", 1)[0] + "--"
    for name in os.listdir(directory):
        if name.startswith(prefix) and name != os.path.basename(path):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name))
    print(json.dumps({"written": sorted(values), "path": path}))
    return 0
