"""What the platform hooks were on a run's node (pure): the record kept on the run, its warnings.

The record is built from what the control side asked for (the box's effective hooks) and what the
node measured (a proxy file found or not, the names it exported, the interpreter there or not); the
node's answer is untrusted, so only booleans and well-formed names are taken from it.
"""

from platforms.hooks import ENV_NAME, identity

MAX_EXPORTED = 50


def record(declared: dict, measured) -> dict:
    measured = measured if isinstance(measured, dict) else {}
    proxy, seen = declared.get("proxy"), measured.get("proxy") if isinstance(measured.get("proxy"), dict) else {}
    kept = {"env": dict(declared.get("env") or {}), "interpreter": declared.get("interpreter"), "proxy": None}
    if declared.get("interpreter"):
        kept["interpreter_found"] = measured.get("interpreter_found") is True
    if proxy:
        exported = [name for name in seen.get("exported") or [] if isinstance(name, str) and ENV_NAME.fullmatch(name)]
        found = seen.get("found")
        kept["proxy"] = {
            "source": proxy.get("source"),
            "found": found if isinstance(found, bool) else None,
            "exported": sorted(exported)[:MAX_EXPORTED],
            "unset": list(proxy.get("unset") or []),
        }
    return kept


def warnings(kept: dict) -> list[str]:
    """What a person should know before paying for the run: a hook the platform promises and the box lacks."""
    said = []
    proxy = kept.get("proxy")
    if proxy and proxy.get("source") and proxy.get("found") is False:
        said.append(
            f"The proxy hook {proxy['source']} is not on this box: downloads from Hugging Face, GitHub or "
            "wandb may hang; set the instance's proxy hook, or ignore this if the job needs no network."
        )
    if kept.get("interpreter") and not kept.get("interpreter_found"):
        said.append(f"The platform's interpreter {kept['interpreter']} is not on this box: the image's python3 runs.")
    return said


def sha256(kept: dict) -> str:
    return identity(kept)
