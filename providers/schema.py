"""The shapes a provider's published API documents, in our own words, and how a value is checked against
them. Each provider's `schema.py` writes down the requests we send and the answers we read (fields, types,
enums, required keys), citing the document, version and path it was read from; the suite checks every
request an adapter builds, every field it reads and every answer a stand-in gives against them.

A schema is a JSON Schema subset: type (a name or a list of names), properties, required,
additionalProperties (False: a field the provider does not define is refused, as RunPod v2 does), items,
enum, minimum, maximum, maxLength, maxItems, pattern. Pure: no HTTP.
"""

import re

TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def _is(value, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, TYPES[name])


def problems(schema: dict, value, where: str = "$") -> list[str]:
    """Every way value departs from schema, each named by its path; [] when it conforms."""
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, name) for name in names):
            return [f"{where}: {type(value).__name__} where the schema has {'/'.join(names)}"]
    found = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{where}: {value} is under its minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.append(f"{where}: {value} is over its maximum {schema['maximum']}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"{where}: {len(value)} characters, over its {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list) and len(value) > schema.get("maxItems", len(value)):
        found.append(f"{where}: {len(value)} items, over its {schema['maxItems']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += problems(schema["items"], item, f"{where}[{index}]")
    if isinstance(value, dict):
        found += _object_problems(schema, value, where)
    return found


def _object_problems(schema: dict, value: dict, where: str) -> list[str]:
    properties = schema.get("properties", {})
    found = [f"{where}: {key} is required" for key in schema.get("required", ()) if key not in value]
    for key, item in value.items():
        if key in properties:
            found += problems(properties[key], item, f"{where}.{key}")
        elif schema.get("additionalProperties") is False:
            found.append(f"{where}: {key} is not a field the provider defines")
        elif isinstance(schema.get("additionalProperties"), dict):
            found += problems(schema["additionalProperties"], item, f"{where}.{key}")
    return found


def defines(schema: dict, path) -> bool:
    """Whether the schema defines a field at path (dict keys; an int steps into a list's items; in a map
    with free keys, any key): a field we read must be one the provider documents."""
    node = schema
    for key in path:
        if isinstance(key, int):
            if "items" not in node:
                return False
            node = node["items"]
        elif key in node.get("properties", {}):
            node = node["properties"][key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
    return True


def nullable(schema: dict) -> dict:
    """The same schema, with null allowed as well."""
    kinds = schema.get("type")
    names = [kinds] if isinstance(kinds, str) else list(kinds or [])
    return {**schema, "type": [*names, "null"]} if names else schema


def closed(properties: dict, required=()) -> dict:
    """An object whose fields are exactly these (a request: nothing the provider does not define)."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def open_object(properties: dict, required=()) -> dict:
    """An object with at least these (an answer: a provider may add fields; we read only these)."""
    return {"type": "object", "properties": properties, "required": list(required)}
