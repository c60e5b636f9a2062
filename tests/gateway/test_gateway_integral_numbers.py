"""An integer field sent as a JSON number with a zero fractional part (``1000.0``, ``1e3``) is
that integer on the translated path, as JSON Schema's ``integer`` and both providers' APIs
read it (a pass-through sends it on as it came); a fractional one (``1000.5``) is a 400."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway import anthropic_api, chat_api
from metis.gateway.inbound import Inbound
from metis.gateway.responses_read import read_responses

SAID = [{"role": "user", "content": "hi"}]
READERS: list[tuple[Callable[[Any], Inbound], dict[str, Any], str]] = [
    (anthropic_api.read_messages, {"messages": SAID}, "max_tokens"),
    (chat_api.read_chat, {"messages": SAID}, "max_tokens"),
    (chat_api.read_chat, {"messages": SAID}, "max_completion_tokens"),
    (read_responses, {"input": "hi"}, "max_output_tokens"),
]


@pytest.mark.parametrize("written", ["1000.0", "1e3", "1000.000", "10E2"])
@pytest.mark.parametrize(("read", "body", "field"), READERS)
def test_an_integral_number_is_the_integer(
    read: Callable[[Any], Inbound], body: dict[str, Any], field: str, written: str
) -> None:
    sent = json.loads(json.dumps({"model": "m", **body})[:-1] + f', "{field}": {written}}}')
    inbound = read(sent)
    assert inbound.max_output_tokens == 1000
    assert type(inbound.max_output_tokens) is int


@pytest.mark.parametrize("written", ["1000.5", "1e-3", "0.0", "-1000.0", "NaN", "Infinity"])
@pytest.mark.parametrize(("read", "body", "field"), READERS)
def test_a_fractional_or_non_positive_number_is_refused(
    read: Callable[[Any], Inbound], body: dict[str, Any], field: str, written: str
) -> None:
    sent = json.loads(json.dumps({"model": "m", **body})[:-1] + f', "{field}": {written}}}')
    with pytest.raises(InvalidRequestError, match=field):
        read(sent)


def test_a_thinking_budget_written_as_an_integral_number_is_the_integer() -> None:
    thinking = {"type": "enabled", "budget_tokens": 2048.0}
    sent = {"model": "m", "max_tokens": 4096.0, "messages": SAID, "thinking": thinking}
    inbound = anthropic_api.read_messages(sent)
    assert inbound.max_output_tokens == 4096
    assert inbound.fields["thinking"].budget_tokens == 2048
    with pytest.raises(InvalidRequestError, match="budget_tokens"):
        anthropic_api.read_messages({**sent, "thinking": {**thinking, "budget_tokens": 2048.5}})
