"""Write the excerpt of a provider's published OpenAPI document the suite checks our schema modules against.

Run by hand, from a checkout of the provider's documentation (not in CI: no network there):

    python tests/provider_specs/extract.py runpod PATH/TO/runpod-docs/api-reference-v2/openapi.json a900806

The excerpt keeps the named components with every $ref resolved and descriptions dropped, and says where
it came from (repository, path, commit, the document's version) in its "source".
"""

import json
import sys
from pathlib import Path

COMPONENTS = {
    "runpod": {
        "repository": "runpod/docs",
        "path": "api-reference-v2/openapi.json",
        "names": [
            "Pod",
            "ListPodsResponse",
            "CreatePodRequest",
            "PodActionRequest",
            "NetworkVolume",
            "ListNetworkVolumesResponse",
            "CreateNetworkVolumeRequest",
            "GpuType",
            "ListGpuTypesResponse",
            "ErrorResponse",
        ],
    },
}
DROPPED = {"description", "example", "examples", "x-mint", "title"}


def resolve(document: dict, node, depth: int = 0, fields: bool = False):
    """node with its $refs resolved; fields: node is a `properties` map (its keys are names, kept all)."""
    if isinstance(node, dict) and "$ref" in node:
        target = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return resolve(document, target, depth + 1) if depth < 12 else {}
    if isinstance(node, dict):
        return {
            key: resolve(document, value, depth, fields=key == "properties" and not fields)
            for key, value in node.items()
            if fields or key not in DROPPED
        }
    if isinstance(node, list):
        return [resolve(document, value, depth) for value in node]
    return node


def main(provider: str, path: str, commit: str) -> None:
    wanted = COMPONENTS[provider]
    document = json.loads(Path(path).read_text())
    excerpt = {
        "source": {
            "repository": wanted["repository"],
            "path": wanted["path"],
            "commit": commit,
            "version": document["info"]["version"],
            "servers": [server["url"] for server in document.get("servers", [])],
        },
        "components": {name: resolve(document, document["components"]["schemas"][name]) for name in wanted["names"]},
    }
    out = Path(__file__).with_name(f"{provider}.json")
    out.write_text(json.dumps(excerpt, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main(*sys.argv[1:4])
