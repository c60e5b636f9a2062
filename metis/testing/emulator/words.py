"""How the scripted model reads a message: its significant words, the names in it, and a JSON
schema filled from it (plausible, deterministic, valid against the schema, ``$ref``s followed).
"""

from __future__ import annotations

import re
from typing import Any

from metis.testing.emulator.wire import object_at


def _words_of(text: str) -> list[str]:
    return text.split()


STOP = frozenset(
    _words_of(
        "a about all also am an and any are as at be been being but by call can could current "
        "data did do does doing fetch find for from function functions get give given had has "
        "have having he here how i if in info information into is it its just know let lets "
        "like look lookup many may me might much must my need new of on one or our over please "
        "retrieve s set shall she should show so some t tell than that the their them then "
        "there these they this those to tool tools under up use using value values very want "
        "was we were what whats when where which who whom whose why will with would you your"
    )
)
CAPITALIZED_STOP = frozenset(
    _words_of(
        "A Add Also An And Another Answer Are At Book But By Calculate Call Can Check Compute "
        "Convert Could Count Create Delete Did Do Make Remove Save Schedule Send Translate "
        "Update Does Explain Find For From Get Give Hello Hey Hi How I If In Is It Let Lets "
        "List Look My No Now Ok Okay On One Or Our Please Search Should Show Tell Thank Thanks "
        "That The Then These This Those Use What Whats When Where Which Who Whom Whose Why Will "
        "With Would Yes Your"
    )
)
QUERY_NAMES = frozenset(
    _words_of(
        "code command content expression input keyword keywords message prompt q query question "
        "search sql statement term terms text topic"
    )
)
NAME_DEFAULTS: dict[str, Any] = {
    "unit": "celsius",
    "units": "metric",
    "language": "en",
    "lang": "en",
    "locale": "en-US",
    "currency": "USD",
    "email": "user@example.com",
    "url": "https://example.com",
    "timezone": "UTC",
    "format": "text",
}
_WORD = re.compile(r"[A-Za-z0-9]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_QUOTED = re.compile(r"[\"“']([^\"”']{2,80})[\"”']")
_PROPER = re.compile(r"\b[A-Z][\w'\-]*(?:\s+(?:de|del|da|of|von|van|la|le)?\s*[A-Z][\w'\-]*)*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# After a sentence's first word, a preposition and then a name say that word is a common noun
# ("Weather in Paris", "Hotels near Rome"), capitalised only because the sentence starts with it.
_COMMON_LEAD = re.compile(r"\s+(?:in|at|for|near|around|from|of|on)\b")


def stem(word: str) -> str:
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    return [stem(w) for w in _WORD.findall(_CAMEL.sub(" ", text)) if w.lower() not in STOP]


def _sentence_start(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?:\n"


def proper_nouns(text: str, exclude: set[str]) -> list[str]:
    out: list[str] = []
    for match in _PROPER.finditer(text):
        found = match.group(0).split()
        if (
            len(found) == 1
            and _sentence_start(text, match.start())
            and _COMMON_LEAD.match(text, match.end())
            and _PROPER.search(re.split(r"[.!?\n]", text[match.end() :], maxsplit=1)[0])
        ):
            continue  # "Weather in Paris": the name is the one after the preposition
        while found and re.sub(r"'s$|'", "", found[0]) in CAPITALIZED_STOP:
            found.pop(0)
        name = re.sub(r"'s$", "", " ".join(found).strip(" '-"))
        if (
            name
            and name not in out
            and (
                (name.isupper() and len(name) > 1)
                or (not name.isupper() and name.lower() not in exclude)
            )
        ):
            out.append(name)
    return out


def schema_type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is not None:
        return str(kind).lower()
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    enum = schema.get("enum")
    return "integer" if enum and isinstance(enum[0], int) else "string"


def first_option(schema: dict[str, Any]) -> dict[str, Any]:
    for key in ("anyOf", "oneOf", "any_of", "one_of"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            typed = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            return typed[0] if typed else options[0]
    return schema


def enum_values(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        if isinstance(schema.get("enum"), list):
            found.update(str(v).lower() for v in schema["enum"])
        for value in schema.values():
            found |= enum_values(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= enum_values(value)
    return found


def inlined(node: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """``node`` with each local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced by what
    it points to; a recursive reference stops, as an open object, after a few levels."""
    if isinstance(node, list):
        return [inlined(item, root, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if depth > 8:
            return {"type": "object"}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return inlined({**target, **rest}, root, depth + 1)
    return {
        k: inlined(v, root, depth) for k, v in node.items() if k not in ("$defs", "definitions")
    }


def entity_property(schema: dict[str, Any]) -> str | None:
    """The property that names the thing a call is about: the first required string property
    that is not a query, a date or an enum."""
    props = schema.get("properties")
    if not isinstance(props, dict):
        return None
    required = schema.get("required")
    for name in [p for p in required if p in props] if isinstance(required, list) else list(props):
        sub = first_option(props[name]) if isinstance(props[name], dict) else {}
        lowered = str(name).lower()
        if (
            schema_type(sub) == "string"
            and "enum" not in sub
            and lowered not in QUERY_NAMES
            and "date" not in lowered
        ):
            return str(name)
    return None


class Filler:
    """Fills a JSON schema (``$ref``s already inlined) from a message. A list of objects
    holds one object per thing the message names only at the outermost list: an object in it
    fills its own lists with one item, so a recursive schema's answer stays small."""

    def __init__(self, message: str, schema: dict[str, Any], *, fan_out: bool = True) -> None:
        self.message, self.lower, self.fan_out = message, message.lower(), fan_out
        self.nouns = proper_nouns(message, enum_values(schema))
        self.numbers: list[str] = _NUMBER.findall(message)
        self.quoted = _QUOTED.findall(message)
        significant = [w for w in _WORD.findall(message) if w.lower() not in STOP]
        self.fallback = significant[-1] if significant else "example"
        self._noun = self._number = 0

    def noun(self) -> str | None:
        self._noun += 1
        return self.nouns[min(self._noun, len(self.nouns)) - 1] if self.nouns else None

    def number(self) -> str | None:
        self._number += 1
        return self.numbers[self._number - 1] if self._number <= len(self.numbers) else None

    def value(self, name: str, schema: dict[str, Any], entity: str | None = None) -> Any:
        schema = first_option(schema)
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return next((o for o in enum if str(o).lower() in self.lower), enum[0])
        if "const" in schema:
            return schema["const"]
        kind = schema_type(schema)
        if kind == "object":
            return self.object(schema, entity=entity)
        if kind == "array":
            return self.array(name, schema)
        if kind in ("integer", "number"):
            found = self.number()
            if found is None:
                default = schema.get("default", schema.get("minimum", 1))
                return default if isinstance(default, int | float) else 1
            return int(float(found)) if kind == "integer" else float(found)
        if kind == "boolean":
            return schema.get("default") if isinstance(schema.get("default"), bool) else True
        return None if kind == "null" else self.string(name, schema, entity)

    def array(self, name: str, schema: dict[str, Any]) -> list[Any]:
        items = object_at(schema, "items") or {"type": "string"}
        item = first_option(items)
        if len(self.nouns) > 1 and schema_type(item) == "string":
            return list(self.nouns)
        if self.fan_out and len(self.nouns) > 1 and entity_property(item):
            return [
                Filler(self.message, item, fan_out=False).object(item, entity=noun)
                for noun in self.nouns[:4]
            ]
        return [self.value(name, items)]

    def string(self, name: str, schema: dict[str, Any], entity: str | None) -> str:
        key = name.lower()
        if entity is not None:
            return entity
        if key in QUERY_NAMES or key.endswith("_query"):
            return self.message.strip()
        if "date" in key:
            found = _DATE.search(self.message)
            return found.group(0) if found else "2025-01-01"
        if key in NAME_DEFAULTS and not self.nouns:
            return str(NAME_DEFAULTS[key])
        if self.quoted:
            return str(self.quoted[0])
        noun = self.noun()
        if noun is not None:
            return noun
        if isinstance(schema.get("default"), str):
            return str(schema["default"])
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return str(examples[0])
        return str(NAME_DEFAULTS.get(key, self.fallback))

    def object(
        self, schema: dict[str, Any], *, entity: str | None = None, every: bool = False
    ) -> dict[str, Any]:
        props = schema.get("properties")
        if not isinstance(props, dict):
            return {}
        wanted = set(schema["required"]) if isinstance(schema.get("required"), list) else set()
        slot = entity_property(schema) if entity is not None else None
        out: dict[str, Any] = {}
        for name, sub in props.items():
            sub = sub if isinstance(sub, dict) else {}
            if every or name in wanted or self.mentioned(sub):
                out[name] = self.value(name, sub, entity if name == slot else None)
        return out

    def mentioned(self, schema: dict[str, Any]) -> bool:
        enum = schema.get("enum")
        return isinstance(enum, list) and any(str(o).lower() in self.lower for o in enum)
