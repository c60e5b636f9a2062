"""The strict_schema stage's conversions, kept by each schema's exact content
(metis/stages/edits/strict_schema.py ``_strict``): one conversion for a schema sent again,
a new object each time, never one schema's conversion for another."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest

from metis.stages.edits import strict_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
    "required": ["city"],
}


class _Kind(StrEnum):
    OBJECT = "object"


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The schemas converted (not read from what was kept)."""
    made: list[Any] = []
    convert = strict_schema.strict_schema_or_reason

    def counted(schema: Any) -> Any:
        made.append(schema)
        return convert(schema)

    monkeypatch.setattr(strict_schema, "strict_schema_or_reason", counted)
    strict_schema._CONVERTED.clear()
    yield made
    strict_schema._CONVERTED.clear()


def test_a_schema_sent_again_is_converted_once_and_given_as_a_new_object(
    conversions: list[Any],
) -> None:
    first, reason, original = strict_schema._strict(copy.deepcopy(SCHEMA))
    assert first is not None and reason is None and first["additionalProperties"] is False
    first["properties"]["city"]["type"] = "edited"  # a later edit of one request's body
    again, _, original_again = strict_schema._strict(copy.deepcopy(SCHEMA))
    assert len(conversions) == 1
    assert again == strict_schema.to_strict_schema(SCHEMA) and again is not first
    assert original_again is original and original == SCHEMA


@pytest.mark.parametrize(
    "changed",
    [
        {**SCHEMA, "required": ["days"]},
        {
            **SCHEMA,
            "properties": {**SCHEMA["properties"], "days": {"type": "integer", "default": True}},
        },
        {
            **SCHEMA,
            "properties": {**SCHEMA["properties"], "days": {"type": "integer", "default": 1.0}},
        },
    ],
    ids=["another-value", "true-for-1", "1.0-for-1"],
)
def test_a_schema_changed_in_any_part_is_converted_anew(
    conversions: list[Any], changed: dict[str, Any]
) -> None:
    strict_schema._strict(copy.deepcopy(SCHEMA))
    converted, _, original = strict_schema._strict(copy.deepcopy(changed))
    assert len(conversions) == 2
    assert converted == strict_schema.to_strict_schema(changed) and original == changed
    given = changed["properties"]["days"]["default"]
    assert type(original["properties"]["days"]["default"]) is type(given)  # 1, True, 1.0 apart


def test_a_schema_marshal_cannot_write_is_kept_by_its_json_text(conversions: list[Any]) -> None:
    schema = {**SCHEMA, "type": _Kind.OBJECT}
    for _ in range(2):
        converted, _, original = strict_schema._strict(copy.deepcopy(schema))
        assert converted == strict_schema.to_strict_schema(SCHEMA) and original == SCHEMA
    assert len(conversions) == 1


def test_a_schema_json_cannot_carry_is_converted_each_time_and_not_kept(
    conversions: list[Any],
) -> None:
    schema = {**SCHEMA, "properties": {"n": {"type": "number", "maximum": math.inf}}}
    for _ in range(2):
        assert strict_schema._strict(copy.deepcopy(schema))[2] is None
    assert len(conversions) == 2 and not strict_schema._CONVERTED


def test_the_conversions_kept_are_bounded(
    conversions: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(strict_schema, "_CONVERTED_AT_MOST", 2)
    schemas = [{**SCHEMA, "description": str(n)} for n in range(3)]
    for schema in [*schemas, schemas[0]]:
        strict_schema._strict(copy.deepcopy(schema))
    assert len(conversions) == 4 and len(strict_schema._CONVERTED) <= 2
