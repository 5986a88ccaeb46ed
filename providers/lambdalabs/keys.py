"""Lambda's launch names keys registered at the account, so the named key is looked up first (GET
/ssh-keys) and must be the rent's own public key, or nothing is launched there. Pure."""


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
