"""Write the excerpt of a provider's published OpenAPI document the suite checks our schema modules against.

Run by hand, from a checkout of the provider's documentation (not in CI: no network there):

    python tests/provider_specs/extract.py runpod PATH/TO/runpod-docs/api-reference-v2/openapi.json a900806
    python tests/provider_specs/extract.py vastai PATH/TO/vast-ai-docs/api-reference/openapi/yaml c624622
    python tests/provider_specs/extract.py lambda PATH/TO/lambda-labs/openapi/_original/lambda-labs-openapi.json 911506f
    python tests/provider_specs/extract.py paperspace PATH/TO/Paperspace-cli/api/openapi.ts c7bdd42

The excerpt keeps the named components (RunPod's one document) or each named file's operations (vast.ai
writes one small document per call: its request body, query parameters and 200 answer) with every $ref
resolved and descriptions dropped, and says where it came from (repository, path, commit, version).
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
VAST_FILES = [
    "search_offers",
    "create_instance",
    "show_instances",
    "show_instance",
    "manage_instance",
    "destroy_instance",
    "attach_ssh",
    "show_user",
    "show_volumes",
]
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


LAMBDA_OPERATIONS = [
    ("post", "/api/v1/instance-operations/launch"),
    ("post", "/api/v1/instance-operations/terminate"),
    ("get", "/api/v1/instances"),
    ("get", "/api/v1/instances/{id}"),
    ("get", "/api/v1/instance-types"),
    ("get", "/api/v1/file-systems"),
    ("post", "/api/v1/filesystems"),
    ("get", "/api/v1/ssh-keys"),
]


def operation_parts(document: dict, operation: dict) -> dict:
    """An operation's request body, query parameters and 200/404 answers, as written."""
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    answers = {
        code: answer.get("content", {}).get("application/json", {})
        for code, answer in operation.get("responses", {}).items()
        if code in ("200", "404")
    }
    query = {p["name"]: p.get("schema", {}) for p in operation.get("parameters", []) if p.get("in") == "query"}
    return {"request": body.get("schema"), "query": query} | {code: a.get("schema") for code, a in answers.items()}


def lambda_operations(path: str, commit: str) -> None:
    """Lambda: one OpenAPI document; the operations we call, each resolved."""
    document = json.loads(Path(path).read_text())
    found = {}
    for method, where in LAMBDA_OPERATIONS:
        operation = document["paths"].get(where, {}).get(method)
        if operation is not None:
            found[f"{method.upper()} {where}"] = resolve(document, operation_parts(document, operation))
    source = {
        "repository": "api-evangelist/lambda-labs",
        "path": "openapi/_original/lambda-labs-openapi.json",
        "commit": commit,
        "version": document["info"]["version"],
        "servers": [server["url"] for server in document.get("servers", [])],
    }
    out = Path(__file__).with_name("lambda.json")
    out.write_text(json.dumps({"source": source, "operations": found}, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {out.stat().st_size} bytes")


def operations(folder: str, commit: str) -> None:
    """vast.ai: one YAML document per call; each operation's request, query and 200 answer, by file."""
    import yaml  # noqa: PLC0415 (only this by-hand path reads YAML)

    found = {}
    for name in VAST_FILES:
        document = yaml.safe_load(Path(folder, f"{name}.yaml").read_text())
        for path, methods in document["paths"].items():
            for method, operation in methods.items():
                body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
                answers = {
                    code: answer.get("content", {}).get("application/json", {})
                    for code, answer in operation.get("responses", {}).items()
                    if code in ("200", "404")
                }
                query = {
                    p["name"]: p.get("schema", {}) for p in operation.get("parameters", []) if p.get("in") == "query"
                }
                kept = {"file": name, "request": body.get("schema"), "query": query}
                kept |= {code: answer.get("schema") for code, answer in answers.items()}
                example = answers.get("200", {}).get("example")
                if isinstance(example, dict) and isinstance(example.get("offers"), dict):  # an open object's fields
                    kept["200 example offer fields"] = sorted(example["offers"])
                found[f"{method.upper()} {path}"] = resolve(document, kept)
    excerpt = {
        "source": {"repository": "vast-ai/docs", "path": "api-reference/openapi/yaml", "commit": commit},
        "operations": found,
    }
    out = Path(__file__).with_name("vastai.json")
    out.write_text(json.dumps(excerpt, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {out.stat().st_size} bytes")


PAPERSPACE_OPERATIONS = {  # the generated file names each operation by its operationId
    "machines-list": "GET /machines",
    "machines-get": "GET /machines/{id}",
    "machines-stop": "PATCH /machines/{id}/stop",
    "machines-delete": "DELETE /machines/{id}",
    "publicIps-list": "GET /public-ips",
    "snapshots-list": "GET /snapshots",
    "sharedDrives-list": "GET /shared-drives",
}


def paperspace_operations(path: str, commit: str) -> None:
    """Paperspace: its CLI's TypeScript, generated from the v1 OpenAPI document, read back into its schemas."""
    from tests.provider_specs import typescript  # noqa: PLC0415 (only this by-hand path reads TypeScript)

    text = Path(path).read_text()
    operations_text = typescript.block(text, "export interface operations {")
    found = {}
    for operation_id, call in PAPERSPACE_OPERATIONS.items():
        operation = typescript.read(typescript.block(operations_text, f'"{operation_id}": {{'))["properties"]
        answers = operation["responses"]["properties"]
        kept = {"operationId": operation_id}
        kept["query"] = operation.get("parameters", {}).get("properties", {}).get("query", {}).get("properties", {})
        kept["request"] = operation.get("requestBody", {}).get("properties", {}).get("content")
        for code in ("200", "default"):
            answer = answers.get(code, {})
            kept[code] = (
                answer.get("properties", {}).get("content", {}).get("properties", {}).get("application/json", answer)
            )
        found[call] = kept
    responses = typescript.read(typescript.block(text, "export interface components {"))["properties"]["responses"]
    error = responses["properties"]["error"]["properties"]["content"]["properties"]["application/json"]
    source = {
        "repository": "Paperspace/cli",
        "path": "api/openapi.ts",
        "commit": commit,
        "generated_from": "https://api.paperspace.com/v1/openapi.json",
    }
    excerpt = {"source": source, "operations": found, "components": {"responses/error": error}}
    out = Path(__file__).with_name("paperspace.json")
    out.write_text(json.dumps(excerpt, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[2]))
    extractors = {"vastai": operations, "lambda": lambda_operations, "paperspace": paperspace_operations}
    extractors.get(sys.argv[1], lambda *rest: main(sys.argv[1], *rest))(*sys.argv[2:4])
