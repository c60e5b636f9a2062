"""strict_schema's watch: strict mode's nulls taken out of a tool's input, without walking
what cannot hold an optional key (metis/wire/strict_schema_nulls.py)."""

from __future__ import annotations

from typing import Any

import pytest

from metis.wire import strict_schema_nulls
from metis.wire.strict_schema_nulls import strip_optional_nulls

DAY = {
    "type": "object",
    "properties": {"d": {"type": "integer"}, "t": {"type": "integer"}},
    "required": ["d", "t"],
}
FORECAST = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string"},
        "days": {"type": "array", "items": DAY},
    },
    "required": ["city"],
}


class _Watched(list[Any]):
    """A list that counts the times its items are walked."""

    walked = 0

    def __iter__(self) -> Any:
        _Watched.walked += 1
        return super().__iter__()


def test_a_list_whose_items_hold_no_optional_key_is_not_walked() -> None:
    _Watched.walked = 0
    days = _Watched({"d": i, "t": None} for i in range(200))
    value = {"city": "Paris", "unit": None, "days": days}
    cleaned = strip_optional_nulls(value, FORECAST)
    assert cleaned == {"city": "Paris", "days": days}
    assert cleaned["days"] is days  # a required null stays, the list handed back as it is
    assert _Watched.walked == 0


def test_a_schema_with_every_key_required_hands_the_value_back() -> None:
    schema = {"type": "object", "properties": {"days": FORECAST["properties"]["days"]}}
    schema["required"] = ["days"]
    value = {"days": [{"d": None, "t": 1}]}
    assert strip_optional_nulls(value, schema) is value


RECURSIVE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["children"],
}
ALL_REQUIRED_RECURSIVE = {
    "type": "object",
    "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}, "n": {"type": "integer"}},
    "required": ["left", "right", "n"],
}
BRANCHED = {
    "type": "object",
    "properties": {
        "edit": {
            "anyOf": [
                {"$ref": "#/$defs/Edit"},
                {"type": "null"},
            ]
        }
    },
    "required": ["edit"],
    "$defs": {
        "Edit": {
            "type": "object",
            "properties": {"old": {"type": "string"}, "all": {"type": "boolean"}},
            "required": ["old"],
        }
    },
}


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        (
            RECURSIVE,
            {"name": None, "children": [{"name": None, "children": []}]},
            {"children": [{"children": []}]},
        ),
        (
            ALL_REQUIRED_RECURSIVE,
            {"left": None, "right": {"left": None, "right": None, "n": None}, "n": 1},
            None,
        ),
        (BRANCHED, {"edit": {"old": None, "all": None}}, {"edit": {"old": None}}),
        (FORECAST, {"city": None, "days": [{"d": None, "t": 2}]}, None),
    ],
)
def test_the_same_as_the_whole_walk(
    schema: dict[str, Any], value: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    whole = strict_schema_nulls._strip(value, schema, schema, 0)
    cleaned = strip_optional_nulls(value, schema)
    assert cleaned == whole == (value if expected is None else expected)
    if expected is None:
        assert cleaned is value
