"""Read the TypeScript that openapi-typescript writes from an OpenAPI document (Paperspace/cli's
`api/openapi.ts`) back into the document's JSON schemas: object types, optional members, unions, string
literals, arrays, `Record<…>`, `Date` (a date-time string) and `components[…][…]` references. Only what
that generator writes; anything else is refused, never guessed. Run by hand from extract.py (no CI path).
"""

import re

TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<word>[A-Za-z_$][\w$]*|\d+)|(?P<mark>[{}()\[\]<>|&;:?,]))')
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
PRIMITIVES = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "null": {"type": "null"},
    "Date": {"type": "string", "format": "date-time"},
    "unknown": {},
    "never": {"not": {}},
}


def tokens(text: str) -> list[str]:
    text, found, at = COMMENT.sub(" ", text), [], 0
    while text[at:].strip():
        match = TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"cannot read the TypeScript at {text[at : at + 40]!r}")
        found.append(match.group(match.lastgroup))
        at = match.end()
    return found


class Reader:
    def __init__(self, text: str):
        self.words, self.at = tokens(text), 0

    def peek(self) -> str | None:
        return self.words[self.at] if self.at < len(self.words) else None

    def take(self, wanted: str | None = None) -> str:
        word = self.peek()
        if word is None or (wanted is not None and word != wanted):
            raise ValueError(f"expected {wanted!r}, found {word!r} at token {self.at}")
        self.at += 1
        return word

    def type(self) -> dict:
        if self.peek() == "|":
            self.take()
        kinds = [self.intersection()]
        while self.peek() == "|":
            self.take()
            kinds.append(self.intersection())
        return union(kinds)

    def intersection(self) -> dict:
        kinds = [self.postfix()]
        while self.peek() == "&":
            self.take()
            kinds.append(self.postfix())
        return kinds[0] if len(kinds) == 1 else {"allOf": kinds}

    def postfix(self) -> dict:
        kind = self.primary()
        while self.peek() == "[" and self.words[self.at + 1] == "]":
            self.take("[")
            self.take("]")
            kind = {"type": "array", "items": kind}
        return kind

    def primary(self) -> dict:
        if self.peek() == "readonly":
            self.take()
        word = self.take()
        if word == "(":
            kind = self.type()
            self.take(")")
            return kind
        if word == "{":
            return self.members()
        if word.startswith('"'):
            return {"type": "string", "enum": [word[1:-1]]}
        if word == "Record":
            self.take("<")
            self.type()
            self.take(",")
            values = self.type()
            self.take(">")
            return {"type": "object", **({"additionalProperties": values} if values != PRIMITIVES["never"] else {})}
        if word == "components":
            where = []
            while self.peek() == "[":
                self.take("[")
                where.append(self.take()[1:-1])
                self.take("]")
            return {"$ref": "#/components/" + "/".join(where)}
        if word in PRIMITIVES:
            return dict(PRIMITIVES[word])
        raise ValueError(f"a TypeScript type this reader does not know: {word!r}")

    def members(self) -> dict:
        properties, required = {}, []
        while self.peek() != "}":
            if self.peek() == "readonly" and self.words[self.at + 1] not in (":", "?"):
                self.take()
            name = self.take().strip('"')
            optional = self.peek() == "?"
            if optional:
                self.take()
            self.take(":")
            properties[name] = self.type()
            if not optional:
                required.append(name)
            if self.peek() == ";":
                self.take()
        self.take("}")
        return {"type": "object", "properties": properties, "required": sorted(required)}


def union(kinds: list[dict]) -> dict:
    """One schema for a union: literals of one type become an enum; a kind or null becomes a nullable kind."""
    if len(kinds) == 1:
        return kinds[0]
    nulls = [kind for kind in kinds if kind == {"type": "null"}]
    real = [kind for kind in kinds if kind not in nulls]
    if real and all(set(kind) == {"type", "enum"} and kind["type"] == "string" for kind in real):
        merged = {"type": "string", "enum": [value for kind in real for value in kind["enum"]]}
    elif len(real) == 1 and "anyOf" in real[0]:
        return {"anyOf": [*real[0]["anyOf"], *nulls]}
    elif len(real) == 1:
        merged = dict(real[0])
    else:
        return {"anyOf": kinds}
    if nulls:
        types = merged.get("type")
        merged["type"] = [*([types] if isinstance(types, str) else types or []), "null"]
        if "enum" in merged:
            merged["enum"] = [*merged["enum"], None]
    return merged


def block(text: str, opening: str) -> str:
    """The braced body that follows the first `opening` in text, comments dropped (its braces balanced)."""
    text = COMMENT.sub(" ", text)
    start = text.index(opening) + len(opening) - 1
    depth = 0
    for at in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        if depth == 0:
            return text[start : at + 1]
    raise ValueError(f"{opening!r} does not close")


def read(text: str) -> dict:
    return Reader(text).type()
