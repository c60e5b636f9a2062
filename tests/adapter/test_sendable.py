"""first_unsendable: the usual value is told sendable without naming paths, and anything
else is still found and named (metis/adapter/sendable.py)."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import pytest

from metis.adapter.sendable import MAX_DEPTH, check_request, first_unsendable
from metis.errors import InvalidRequestError
from metis.model import CanonicalRequest, Message, ToolUseBlock


class _Label(StrEnum):
    A = "a"


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        {"city": "Oslo", "n": 1, "t": 1.5, "ok": True, "none": None, "list": [1, (2, 3)]},
        {"label": _Label.A, "big": 10**30, "text": "æøå ✓"},  # subclasses and non-ASCII
        _nested(MAX_DEPTH),  # the leaf at the limit, no container beyond it
    ],
    ids=["plain", "subclasses", "at-the-limit"],
)
def test_what_json_carries_is_sendable(value: Any) -> None:
    assert first_unsendable(value, "input") is None


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ({"a": [1, {"b": math.nan}]}, "input.a[1].b: nan"),
        ({"a": ("x", b"y")}, "input.a[1]: a bytes"),
        ({"a": {2: "x"}}, "input.a: the key 2 is a int"),
        ({"a": ["ok \ud800"]}, "input.a[0]: a string with a lone UTF-16 surrogate"),
        (_nested(MAX_DEPTH + 1), "nested deeper than 100 levels"),
    ],
    ids=["nan", "bytes-in-tuple", "int-key", "surrogate", "too-deep"],
)
def test_what_json_cannot_carry_is_named_with_its_path(value: Any, found: str) -> None:
    problem = first_unsendable(value, "input")
    assert problem is not None and found in problem


def test_a_message_sent_again_is_checked_again_when_its_input_changed() -> None:
    good = ToolUseBlock(id="tu_1", name="f", input={"a": 1})
    message = Message.assistant(good)
    request = CanonicalRequest(
        model="m:x", messages=[Message.user("q"), message], max_output_tokens=10
    )
    check_request(request, "p")
    check_request(request, "p")  # kept as sendable
    bad = good.model_copy(update={"input": {"a": {1, 2}}})
    edited = message.model_copy(update={"content": [bad]})
    with pytest.raises(InvalidRequestError, match=r"messages\[1\]\.content\[0\]\.input\.a"):
        check_request(request.model_copy(update={"messages": [request.messages[0], edited]}), "p")
    message.content[0] = bad
    with pytest.raises(InvalidRequestError, match=r"messages\[1\]\.content\[0\]\.input\.a"):
        check_request(request, "p")


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("later", "found"),
    [
        (math.inf, "input.a[1].b: inf"),
        ({1, 2}, "input.a[1].b: a set"),
        (b"bytes", "input.a[1].b: a bytes"),
        ({3: "x"}, "input.a[1].b: the key 3 is a int"),
        ("lone \udc00", "input.a[1].b: a string with a lone UTF-16 surrogate"),
    ],
    ids=["inf", "set", "bytes", "int-key", "surrogate"],
)
def test_a_value_found_sendable_is_checked_as_it_is_now(later: Any, found: str) -> None:
    value: dict[str, Any] = {"a": [1, {"b": 2.5}]}
    assert first_unsendable(value, "input") is None
    assert first_unsendable({"a": [1, {"b": 2.5}]}, "input") is None  # the same, made anew
    value["a"][1]["b"] = later
    problem = first_unsendable(value, "input")
    assert problem is not None and found in problem


def test_a_subclass_beside_a_plain_twin_is_still_walked() -> None:
    assert first_unsendable({"k": "v", "n": 1}, "input") is None
    assert first_unsendable({"k": _Text("v"), "n": 1}, "input") is None
    assert first_unsendable({"k": _Text("v \ud800"), "n": 1}, "input") is not None
