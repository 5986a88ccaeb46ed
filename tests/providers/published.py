"""Our schema modules against a provider's published document: where ours says what the document does not
(a field it lacks, a required set, an enum, a type). Shared by each provider's schema test."""


def flat(node: dict) -> dict:
    """A published schema with its allOf merged and an anyOf of one kind and null read as nullable."""
    if not isinstance(node, dict):
        return {}
    merged = {key: value for key, value in node.items() if key not in ("allOf", "anyOf")}
    for part in node.get("allOf", []):
        part = flat(part)
        merged.setdefault("properties", {}).update(part.get("properties", {}))
        merged["required"] = sorted({*merged.get("required", []), *part.get("required", [])})
        for key in ("type", "enum", "items", "minimum", "maximum", "pattern"):
            if key in part:
                merged.setdefault(key, part[key])
    if merged.pop("nullable", False) is True and _types(merged):  # OpenAPI 3.0's way of saying it
        merged["type"] = [*_types(merged), "null"]
    kinds = [flat(part) for part in node.get("anyOf", [])]
    if kinds and any(kind.get("type") == "null" for kind in kinds):
        (real,) = [kind for kind in kinds if kind.get("type") != "null"] or [{}]
        merged |= {**real, "type": [*_types(real), "null"]}
    return merged


def _types(node: dict) -> list[str]:
    kinds = node.get("type")
    return [kinds] if isinstance(kinds, str) else list(kinds or [])


def disagreements(mine: dict, published: dict, where: str) -> list[str]:
    """Where our schema says what the document does not: a field it lacks, a required set, an enum, a type."""
    theirs, found = flat(published), []
    if set(_types(mine)) - set(_types(theirs)) and _types(theirs):
        found.append(f"{where}: type {_types(mine)} where the document has {_types(theirs)}")
    if "enum" in mine and sorted(map(str, mine["enum"])) != sorted(map(str, theirs.get("enum", []))):
        found.append(f"{where}: enum {mine['enum']} where the document has {theirs.get('enum')}")
    if "properties" in mine:
        if sorted(mine.get("required", [])) != sorted(theirs.get("required", [])):
            found.append(f"{where}: required {sorted(mine.get('required', []))} ≠ {sorted(theirs.get('required', []))}")
        for key, value in mine["properties"].items():
            if key not in theirs.get("properties", {}):
                found.append(f"{where}.{key}: not a field the document defines")
            else:
                found += disagreements(value, theirs["properties"][key], f"{where}.{key}")
    if "items" in mine:
        found += disagreements(mine["items"], theirs.get("items", {}), f"{where}[]")
    if isinstance(mine.get("additionalProperties"), dict):
        found += disagreements(mine["additionalProperties"], theirs.get("additionalProperties") or {}, f"{where}{{}}")
    return found


def adapter_reads(api) -> dict[str, list[list]]:
    """The paths an adapter's ProviderApi reads, by verb: the status word, each listed box's fields, the
    next page's token where it pages, and each resource list's fields (those it names)."""
    item = [*api.list_field, 0]
    box_fields = (api.item_status, api.item_host, api.item_port, api.item_name, api.item_rate, api.item_end)
    reads = {
        "status": [list(api.status_field)],
        "list": [list(api.list_field), [*item, "id"]] + [[*item, *field] for field in box_fields if field],
    }
    if api.paging:
        reads["list"].append(list(api.paging.next_field))
    for listing in api.resources:
        where = [*listing.list_field, 0]
        fields = (listing.size_field, listing.name_field, listing.id_field, listing.rate_field)
        reads[listing.verb] = [list(listing.list_field)] + [[*where, *field] for field in fields if field]
    return reads
