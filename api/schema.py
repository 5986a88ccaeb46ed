"""What the OpenAPI schema says beyond what drf-spectacular reads from the views: every error answer.

Every operation may answer an error in one shape (api/errors.py: `{"error": code, "detail": …}`), and a
generated client must know each status it can meet: bad input (400), not signed in (401), not allowed
(403), not found (404), a verb the method or state refuses (405, 409), an unreadable or too large body
(406, 413, 415), throttled (429). A postprocessing hook adds them to every operation, so no view can
forget one."""

ERROR = {
    "type": "object",
    "description": "Every API error: a short code and what was wrong (a message, a list, or field → messages).",
    "properties": {"error": {"type": "string"}, "detail": {}},
    "required": ["error", "detail"],
}
ERRORS = {
    "400": "Bad input: what is wrong, under each field (or non_field_errors).",
    "401": "Not signed in: send `Authorization: Token <token>`.",
    "403": "Not allowed: the role or project this needs, or a person's act (approvals).",
    "404": "Not found, or not visible to you.",
    "405": "Method not allowed here.",
    "406": "Not acceptable: this API answers JSON.",
    "409": "The object's state refuses this verb now (or a spend waits for an approver).",
    "413": "The body is too large.",
    "415": "Send the body as application/json.",
    "429": "Too many requests: try again later.",
}


def add_error_responses(result, generator, request, public):
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            for code, description in ERRORS.items():
                responses.setdefault(code, {"description": description, "content": reference})
    return result
