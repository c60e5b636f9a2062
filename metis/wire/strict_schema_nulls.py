"""The caller's schema semantics restored on a strict-mode reply: strict mode makes the model
send ``"offset": null`` where the caller's schema said the key may be absent, so the ``null``
values of keys that were optional in the caller's own schema are removed again."""

from __future__ import annotations

from typing import Any

from metis.wire.strict_schema import Schema, is_object_schema


def strip_optional_nulls(value: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """``value`` without the ``None`` values of keys that ``schema`` (the caller's original
    schema, the root for ``$ref``s) leaves optional, at every object level it describes.
    Gives back ``value`` itself when there is nothing to remove; never modifies it."""
    if not _may_strip(schema, schema):
        return value
    cleaned = _strip(value, schema, schema, 0)
    return cleaned if isinstance(cleaned, dict) else value


_MAX_DEPTH = 64


def _strip(value: Any, schema: Any, root: Schema, depth: int) -> Any:
    if depth > _MAX_DEPTH or not isinstance(schema, dict):
        return value
    schema = _resolve(schema, root)
    if schema is None:
        return value
    if isinstance(value, dict):
        target = _object_schema(schema, root)
        if target is None:
            return value
        properties = target.get("properties")
        if not isinstance(properties, dict):
            return value
        required = target.get("required", [])
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if key not in properties:
                continue
            if item is None:
                if key not in required:
                    out = dict(value) if out is None else out
                    del out[key]
                continue
            cleaned = _strip(item, properties[key], root, depth + 1)
            if cleaned is not item:
                out = dict(value) if out is None else out
                out[key] = cleaned
        return value if out is None else out
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict) or not _may_strip(items, root):
            return value  # (a list of many items, none of which can hold an optional key)
        new = [_strip(v, items, root, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(new, value, strict=True)) else new
    return value


def _may_strip(schema: Any, root: Schema) -> bool:
    """Whether a value ``schema`` describes can hold a key :func:`_strip` would remove: an
    object schema reachable from it (through properties, items, ``$ref``s and the branches
    :func:`_object_schema` follows) with a property that is not required. Each schema object
    is looked at once, so a recursive schema ends."""
    pending, seen = [schema], set()
    while pending:
        node = pending.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        node = _resolve(node, root)
        if node is None:
            continue
        pending.append(node.get("items"))
        target = _object_schema(node, root)
        if target is None or not isinstance(properties := target.get("properties"), dict):
            continue
        required = target.get("required", [])
        for key, child in properties.items():
            if key not in required:
                return True
            pending.append(child)
    return False


def _object_schema(schema: Schema, root: Schema) -> Schema | None:
    """The schema that describes a dict value: ``schema`` itself, its single ``allOf``
    member, or its only object branch of ``anyOf``."""
    if "properties" in schema:
        return schema
    for key in ("allOf", "anyOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            resolved = [_resolve(b, root) for b in branches if isinstance(b, dict)]
            objects = [b for b in resolved if b is not None and is_object_schema(b)]
            if len(objects) == 1:
                return _object_schema(objects[0], root)
    return None


def _resolve(schema: Schema, root: Schema) -> Schema | None:
    """Follow a local ``$ref`` (a few hops at most); ``None`` if it leads nowhere."""
    for _ in range(8):
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        target: Any = root
        if ref != "#":
            if not ref.startswith("#/"):
                return None
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    return None
                target = target[part]
        if not isinstance(target, dict):
            return None
        schema = target
    return None
