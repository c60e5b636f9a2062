"""The tool definitions' text the estimate counts, made once per schema object: never an
earlier rendering of a schema since changed in place, nor of another tool that compares
equal."""

from __future__ import annotations

import json

import pytest

from metis.catalog.estimate_tools import rendered, typescript
from metis.model.request import ToolDefinition


def _json(tool: ToolDefinition) -> str:
    plain = {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    return json.dumps(plain, ensure_ascii=False, separators=(",", ":"))


def _schema() -> dict[str, object]:
    return {"type": "object", "properties": {"n": {"type": "integer", "maximum": 1}}}


@pytest.mark.parametrize("ts", [False, True])
def test_a_schema_changed_in_place_is_rendered_as_it_is_now(ts: bool) -> None:
    tool = ToolDefinition(name="count", description="Counts.", input_schema=_schema())
    made = (lambda t: typescript(t)) if ts else _json
    assert rendered(tool, ts) == made(tool)
    tool.input_schema["properties"]["m"] = {"type": "string", "description": "added later"}
    assert rendered(tool, ts) == made(tool)
    assert "added later" in rendered(tool, ts)


def test_values_python_calls_equal_are_rendered_apart() -> None:
    one = ToolDefinition(name="t", input_schema=_schema())
    true = ToolDefinition(name="t", input_schema=_schema())
    true.input_schema["properties"]["n"]["maximum"] = True
    assert one.input_schema == true.input_schema  # 1 == True in Python, not in JSON
    assert rendered(one, False) == _json(one)
    assert rendered(true, False) == _json(true) != rendered(one, False)


def test_the_two_forms_are_kept_apart_and_kept_with_the_schema_object() -> None:
    tool = ToolDefinition(name="t", description="d", input_schema=_schema())
    assert rendered(tool, True) == typescript(tool)
    assert rendered(tool, False) == _json(tool)
    assert rendered(tool, False) is rendered(tool, False)  # found by the schema object
    renamed = tool.model_copy(update={"name": "u"})  # the same schema, another tool's text
    assert rendered(renamed, False) == _json(renamed) != rendered(tool, False)
    again = ToolDefinition(name="t", description="d", input_schema=_schema())
    assert rendered(again, False) == rendered(tool, False)  # made anew: alike


def test_a_schema_marshal_cannot_write_is_rendered_each_time() -> None:
    class Mapping(dict[str, object]):
        pass

    tool = ToolDefinition(name="t", input_schema=Mapping(type="object"))
    assert rendered(tool, False) == _json(tool)


def test_a_tools_count_is_kept_with_its_schema_and_counted_anew_once_changed() -> None:
    from metis.catalog.estimate import estimate_request_tokens
    from metis.model import CanonicalRequest, Message

    tool = ToolDefinition(name="t", description="d", input_schema=_schema())
    request = CanonicalRequest(
        model="m", messages=[Message.user("hi")], tools=[tool], max_output_tokens=8
    )
    before = estimate_request_tokens(request)
    assert estimate_request_tokens(request) == before
    tool.input_schema["properties"]["m"] = {"type": "string", "description": "word " * 200}
    assert estimate_request_tokens(request) > before + 100
