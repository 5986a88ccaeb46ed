"""How a rented box is given the rent's SSH key, per provider, as its documented API says. Pure: the
calls are renting.py's.

- RunPod: the pod's `PUBLIC_KEY` environment variable, which its images write to authorized_keys.
- vast.ai: account keys reach only boxes created after them, so the key is attached to the new box
  (`POST /instances/{id}/ssh/`) before it is registered.
- Lambda: a launch names keys registered at the account, so the named key is looked up first and must
  be the rent's own public key, or nothing is launched there.
"""

ATTACHED_AFTER_CREATE = frozenset({"vastai"})
NAMED_AT_LAUNCH = frozenset({"lambda"})  # the launch names an account key: it is checked to be ours first


def same_key(one: str, other: str) -> bool:
    """Two public-key lines name the same key: type and base64 equal (a comment is not the key)."""
    return one.split()[:2] == other.split()[:2] and len(one.split()) >= 2


def lambda_key_problem(body, name: str, public_key: str) -> str | None:
    """Why a Lambda launch naming this key would not let us in, read from GET /ssh-keys, or None."""
    keys = body.get("data") if isinstance(body, dict) else None
    if not isinstance(keys, list):
        return "Lambda's list of SSH keys was unreadable"
    named = [k for k in keys if isinstance(k, dict) and k.get("name") == name]
    if not named:
        return f"Lambda has no SSH key named {name}: add its public key there under that name"
    if not any(isinstance(k.get("public_key"), str) and same_key(k["public_key"], public_key) for k in named):
        return f"Lambda's SSH key named {name} is another key than this rent's: replace it there, or rename"
    return None


def attached(body) -> bool:
    """vast.ai's answer to an attach: success said, nothing else taken as it."""
    return isinstance(body, dict) and body.get("success") is True
