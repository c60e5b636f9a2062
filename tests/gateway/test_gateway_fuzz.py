"""The gateway's request readers under malformed and adversarial input: a valid request of
each API with one value anywhere in it replaced (a wrong type at any level, deep nesting, huge
numbers, lone surrogates, empty and long strings) or removed, and raw bodies that are not
JSON at all. A reader raises a classified metis error (or a validation error, which the
gateway answers as a 400); the gateway answers 200 or a 4xx in the caller's API's error shape,
never a 500 or a hang. The search's size: tests/conftest.py (METIS_FULL_SEARCH)."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from metis.errors import AdapterError, InvalidRequestError
from metis.gateway.anthropic_api import read_messages
from metis.gateway.app import create_app
from metis.gateway.chat_api import read_chat
from metis.gateway.responses_read import read_responses
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config
from tests.json_mutation import changed, paths

PNG = "iVBORw0KGgo="
SEEDS: dict[str, tuple[Any, dict[str, Any]]] = {
    "anthropic": (
        read_messages,
        {
            "model": "m",
            "max_tokens": 100,
            "stream": False,
            "temperature": 0.5,
            "stop_sequences": ["x"],
            "system": [{"type": "text", "text": "Be brief"}],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Hi"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                            "title": "t",
                            "citations": {"enabled": True},
                        },
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hm", "signature": "s"},
                        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                        {
                            "type": "server_tool_use",
                            "id": "srvtoolu_1",
                            "name": "web_search",
                            "input": {"query": "q"},
                        },
                        {
                            "type": "web_search_tool_result",
                            "tool_use_id": "srvtoolu_1",
                            "content": [],
                        },
                        {
                            "type": "text",
                            "text": "cited",
                            "citations": [
                                {
                                    "type": "char_location",
                                    "cited_text": "d",
                                    "document_index": 0,
                                    "start_char_index": 0,
                                    "end_char_index": 1,
                                }
                            ],
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [{"type": "text", "text": "ok"}],
                            "is_error": False,
                        }
                    ],
                },
            ],
            "tools": [
                {
                    "name": "f",
                    "description": "d",
                    "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
                    "strict": True,
                }
            ],
            "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
        },
    ),
    "chat": (
        read_chat,
        {
            "model": "m",
            "max_completion_tokens": 100,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 1,
            "top_p": 0.5,
            "stop": ["x"],
            "reasoning_effort": "low",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": True},
            },
            "messages": [
                {"role": "system", "content": "Be brief"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Hi"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}},
                        {
                            "type": "file",
                            "file": {
                                "file_data": "data:application/pdf;base64," + PNG,
                                "filename": "a.pdf",
                            },
                        },
                        {"type": "input_audio", "input_audio": {"data": PNG, "format": "wav"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": "x",
                    "reasoning_content": "hm",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"a": 1}'},
                        },
                        {"id": "c2", "type": "custom", "custom": {"name": "g", "input": "text"}},
                    ],
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url_citation": {
                                "url": "https://x",
                                "start_index": 0,
                                "end_index": 1,
                                "title": "t",
                            },
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "ok"}]},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "description": "d",
                        "parameters": {"type": "object"},
                        "strict": True,
                    },
                },
                {
                    "type": "custom",
                    "custom": {
                        "name": "g",
                        "format": {
                            "type": "grammar",
                            "grammar": {"syntax": "lark", "definition": 'start: "a"'},
                        },
                    },
                },
            ],
            "tool_choice": {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "f"}}],
                },
            },
            "parallel_tool_calls": False,
        },
    ),
    "responses": (
        read_responses,
        {
            "model": "m",
            "max_output_tokens": 100,
            "stream": False,
            "instructions": "Be brief",
            "store": True,
            "previous_response_id": None,
            "include": ["reasoning.encrypted_content"],
            "reasoning": {"effort": "low", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Hi"},
                        {"type": "input_image", "image_url": "data:image/png;base64," + PNG},
                        {"type": "input_file", "file_data": PNG, "filename": "a.pdf"},
                    ],
                },
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "hm"}],
                    "encrypted_content": "abc",
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "x", "annotations": []}],
                },
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "ok"}],
                },
                {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "t"},
                {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
            ],
            "tools": [
                {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True},
                {
                    "type": "custom",
                    "name": "g",
                    "format": {"type": "grammar", "syntax": "regex", "definition": "a+"},
                },
                {"type": "web_search"},
            ],
            "tool_choice": {"type": "function", "name": "f"},
            "parallel_tool_calls": True,
        },
    ),
}


PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
MODELS = ["flash", "gpt", "gpt5", "sonnet"]  # each API's own (passed through) and translated
HEADERS = {"x-api-key": GATEWAY_KEY, "content-type": "application/json"}


ODD = st.sampled_from(
    [
        *(10**400, -(2**63), 2**64, 1e308, -0.0, "", " ", "\x00", "\ud800", "\udfff x"),
        *("a" * 100_000, "data:", "data:x;base64,", "{", "null", "tu_", "toolu_", "\u202e"),
    ]
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    ODD,
)
KEYS = st.sampled_from(["type", "text", "role", "content", "id", "name", "source", "function"])
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(KEYS | st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn, api: str) -> dict[str, Any]:
    seed = SEEDS[api][1]
    at = draw(st.sampled_from(list(paths(seed))))
    body = changed(seed, at, draw(VALUES), remove=bool(at) and draw(st.booleans()))
    if isinstance(body, dict) and at[:1] != ("model",):
        body["model"] = draw(st.sampled_from(MODELS))
    return body


def test_each_seed_reads() -> None:
    for read, seed in SEEDS.values():
        assert read(copy.deepcopy(seed)).messages


@pytest.mark.parametrize("api", sorted(SEEDS))
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_reader_refuses_what_it_cannot_read_with_a_classified_error(
    api: str, data: st.DataObject
) -> None:
    read = SEEDS[api][0]
    body = data.draw(mutated(api))
    with contextlib.suppress(AdapterError, ValidationError):
        read(body)


def error_shape(api: str, reply: httpx.Response) -> bool:
    body = reply.json()
    if api == "anthropic":
        return body.get("type") == "error" and set(body["error"]) == {"type", "message"}
    return set(body.get("error") or {}) == {"message", "type", "param", "code"}


def answered(api: str, raw: bytes) -> httpx.Response:
    """The gateway's answer to ``raw`` on ``api``'s path, within 60 s."""
    app = create_app(gateway_config(Emulator()))

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
            with anyio.fail_after(60):
                return await gw.post(PATHS[api], content=raw, headers=HEADERS)

    return anyio.run(post)


def assert_answered(api: str, raw: bytes) -> None:
    reply = answered(api, raw)
    case = f"{raw[:300]!r}: {reply.status_code} {reply.text[:300]}"
    assert reply.status_code == 200 or 400 <= reply.status_code < 500, case
    if reply.status_code != 200:
        assert error_shape(api, reply), case


@pytest.mark.parametrize("api", sorted(SEEDS))
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_gateway_answers_a_wrong_request_with_a_4xx_in_its_apis_shape(
    api: str, data: st.DataObject
) -> None:
    body = data.draw(mutated(api))
    assert_answered(api, json.dumps(body).encode("utf-8", "surrogatepass"))


RAW = [
    b"",
    b"null",
    b'"a string"',
    b"\xff\xfe{}",
    b'{"model": "flash", "messages": "\xc3\x28", "input": "\xc3\x28"}',
    b"[" * 100_000,
    b'{"a":' * 5_000,
    b'{"model": 1e999999}',
    b'{"model": "flash", "max_tokens": 1' + b"0" * 5_000 + b"}",
    b'{"model": "flash", "temperature": 1' + b"0" * 400 + b', "messages": [], "input": "hi"}',
    b'{"model": "gpt", "input": "Hi", "messages": [], "instructions": "\\ud800", "tools": []}',
    b'{"model": "sonnet", "messages": [{"role": "user", "content": "Hi"}], "output_config": [1]}',
    *(
        b'{"model": "%s", "messages": [{"role": "user", "content": "\\ud800"}], "input": "\\udfff"}'
        % model
        for model in (b"flash", b"sonnet", b"gpt")
    ),
]


@pytest.mark.parametrize("api", sorted(SEEDS))
@pytest.mark.parametrize("raw", RAW, ids=lambda raw: repr(raw[:40]))
def test_the_gateway_answers_a_body_that_is_not_a_request_with_a_4xx(api: str, raw: bytes) -> None:
    body = raw
    if b"max_tokens" not in raw and b"messages" in raw:  # the Messages API's one required field
        body = raw.replace(b'"messages"', b'"max_tokens": 10, "messages"', 1)
    assert_answered(api, body)


@pytest.mark.parametrize(
    ("read", "body", "words"),
    [
        (read_responses, {"input": [{"type": ["message"], "role": "user"}]}, "input[0].type"),
        (read_responses, {"input": [{"role": ["user"], "content": "Hi"}]}, "input[0].role"),
        (
            read_chat,
            {
                "messages": [{"role": "user", "content": "Hi"}],
                "tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": ["auto"]}},
            },
            "allowed_tools.mode",
        ),
        (read_chat, {"messages": [], "temperature": 10**400}, "temperature"),
    ],
)
def test_what_the_search_found_is_a_400(read: Any, body: dict[str, Any], words: str) -> None:
    """A list where a name goes was an unhashable TypeError, an integer past any float an
    OverflowError: each a 500."""
    with pytest.raises(InvalidRequestError, match=re.escape(words)):
        read({"model": "m", **body})


def test_the_emulator_refuses_an_output_config_that_is_not_an_object() -> None:
    """Found by the search: passed through, it was the emulator's 500 (an AttributeError)."""
    from metis.testing.emulator.formats.strict_tools import check_anthropic
    from metis.testing.emulator.rules import Refused

    with pytest.raises(Refused, match="output_config: Input should be a valid dictionary"):
        check_anthropic({"output_config": [1]}, None)
    check_anthropic({"output_config": None}, None)
