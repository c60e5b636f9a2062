"""A schema's record (metis/model/schema_forms.py): found by the schema object while it holds
what it held, made anew once it is changed in place, none for what marshal cannot copy, and
bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from metis.model import schema_forms
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.schema_forms import form, own_tools, prepared


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    schema_forms.clear()
    yield
    schema_forms.clear()


def _schema() -> dict[str, object]:
    return {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def test_a_form_is_made_once_per_schema_object_and_key() -> None:
    schema, made = _schema(), []

    def make(value: object) -> str:
        made.append(value)
        return f"form {len(made)}"

    assert form(schema, "a", make) == form(schema, "a", make) == "form 1"
    assert form(schema, "b", make) == "form 2"  # another key: its own form
    assert form(_schema(), "a", make) == "form 3"  # an equal schema, another object
    assert prepared(schema) is prepared(schema)


def test_a_schema_changed_in_place_is_prepared_anew() -> None:
    schema = _schema()
    record = prepared(schema)
    assert record is not None and form(schema, "k", len) == 3
    schema["extra"] = True
    assert form(schema, "k", len) == 4
    assert prepared(schema) is not record
    again = prepared(schema)
    assert again is not None and again.held == schema and again.held is not schema


def test_a_schema_marshal_cannot_copy_has_no_record_and_its_form_is_made_each_time() -> None:
    class Mapping(dict[str, object]):
        pass

    schema, made = Mapping(type="object"), []
    assert prepared(schema) is None
    form(schema, "k", made.append)
    form(schema, "k", made.append)
    assert made == [schema, schema]


def test_records_and_forms_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_forms, "RECORDS_AT_MOST", 4)
    monkeypatch.setattr(schema_forms, "FORMS_AT_MOST", 3)
    schemas = [_schema() for _ in range(10)]
    for schema in schemas:
        prepared(schema)
    assert len(schema_forms._RECORDS) == 4
    one = schemas[-1]
    for key in range(10):
        form(one, key, len)
    record = prepared(one)
    assert record is not None and len(record.forms) <= 3


def test_own_tools_gives_each_call_its_own_schemas() -> None:
    tool = ToolDefinition(name="t", input_schema=_schema())
    request = CanonicalRequest(model="m", messages=[], tools=[tool], max_output_tokens=8)
    own = own_tools(request)
    assert own.tools[0].input_schema == tool.input_schema
    own.tools[0].input_schema["properties"]["m"] = {}
    assert tool.input_schema == _schema() and request.tools[0] is tool
