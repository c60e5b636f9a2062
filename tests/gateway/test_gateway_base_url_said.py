"""A client whose base URL misses the gateway's ``/v1`` (an OpenAI SDK given the bare
address) or repeats it (an Anthropic SDK given ``.../v1``, which adds ``/v1`` itself) gets the
404 of a path the gateway does not serve, saying the base URL to give, where it said only
``Invalid URL``; any other unknown path is the plain 404 still."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gateway_fixture import GATEWAY_KEY

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID: Any = [{"role": "user", "content": "Hi"}]


def test_an_openai_base_url_without_v1_is_told_to_end_in_v1(url: str) -> None:
    client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="flash", messages=SAID)
    assert refused.value.body["message"] == (  # type: ignore[index]
        "Invalid URL (POST /chat/completions): this gateway serves it at /v1/chat/completions: "
        "an OpenAI client's base URL ends in /v1"
    )


def test_an_anthropic_base_url_with_v1_is_told_to_leave_it_out(url: str) -> None:
    client = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as refused:
        client.messages.create(model="flash", max_tokens=50, messages=SAID)
    message = refused.value.body["error"]["message"]  # type: ignore[index]
    assert message == (
        "Invalid URL (POST /v1/v1/messages): the client's base URL ends in /v1, which its SDK "
        "adds itself: give the gateway's address alone (an Anthropic client's base URL has no "
        "/v1)"
    )


def test_another_unknown_path_is_the_plain_404(url: str) -> None:
    client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    with pytest.raises(openai.NotFoundError) as refused:
        client.post("/nowhere", body={}, cast_to=object)
    assert refused.value.body["message"] == "Invalid URL (POST /v1/nowhere)"  # type: ignore[index]
