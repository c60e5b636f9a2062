"""updated(): model_copy(update=...) without pydantic's generic copy (metis/model/updated.py)."""

from __future__ import annotations

import pydantic
import pytest
from pydantic import BaseModel, ConfigDict

from metis.model.content import Message, ToolResultBlock, ToolUseBlock
from metis.model.request import CanonicalRequest
from metis.model.updated import updated


def test_the_copy_equals_model_copy_and_leaves_the_original_alone() -> None:
    block = ToolUseBlock(id="tu_1", name="lookup", input={"city": "Oslo"})
    copied = updated(block, id="toolu_1")
    assert copied == block.model_copy(update={"id": "toolu_1"})
    assert copied.model_fields_set == {"id", "name", "input"}
    assert block.id == "tu_1" and copied.input is block.input  # shallow, as model_copy
    assert copied.model_dump() == {**block.model_dump(), "id": "toolu_1"}
    with pytest.raises(pydantic.ValidationError):  # still frozen
        copied.id = "x"  # type: ignore[misc]


def test_a_field_given_by_default_counts_as_set_once_changed() -> None:
    result = ToolResultBlock(tool_use_id="tu_1")
    copied = updated(result, content="done")
    assert "content" in copied.model_fields_set
    assert copied.model_dump(exclude_unset=True) == {"tool_use_id": "tu_1", "content": "done"}


def test_nested_models_and_requests_copy_too() -> None:
    request = CanonicalRequest(model="m", messages=[Message.user("hi")], max_output_tokens=5)
    messages = [Message.user("hello")]
    copied = updated(request, messages=messages)
    assert copied == request.model_copy(update={"messages": messages})
    assert copied.messages is messages and request.messages[0].text == "hi"


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")

    a: int = 0


class _Private(BaseModel):
    a: int = 0
    _seen: int = pydantic.PrivateAttr(default=3)


def test_extra_fields_private_attributes_and_unknown_names_go_through_model_copy() -> None:
    open_ = _Open(a=1, b=2)
    assert updated(open_, a=5).model_extra == {"b": 2}
    assert updated(open_, c=7) == open_.model_copy(update={"c": 7})  # an extra field, as there
    private = updated(_Private(a=1), a=2)
    assert private.a == 2 and private._seen == 3
