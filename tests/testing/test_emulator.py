"""metis.testing.emulator: the wire formats over real sockets, auth, validation, every fault kind,
determinism, and metis itself talking to it end to end (asyncio and trio)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator, FaultSpecError, parse_faults
from metis.testing.emulator.faults import FaultPlan

from .. import emulator_fixture

# the module's fixtures (conftest may provide the same ones)
emulator_server = emulator_fixture.emulator_server
emulator = emulator_fixture.emulator

ROOT = Path(__file__).parents[2]
PROVIDERS = ["anthropic", "openai", "openai_responses", "gemini", "ollama"]
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
ASK = "What's the weather in Paris?"
AUTH = {
    "anthropic": {"x-api-key": "test", "anthropic-version": "2023-06-01"},
    "openai": {"authorization": "Bearer test"},
    "openai_responses": {"authorization": "Bearer test"},
    "gemini": {"x-goog-api-key": "test"},
    "ollama": {},
}


def path_for(provider: str, stream: bool) -> str:
    return {
        "anthropic": "/v1/messages",
        "openai": "/v1/chat/completions",
        "openai_responses": "/v1/responses",
        "gemini": "/v1beta/models/gemini-2.5-flash:"
        + ("streamGenerateContent?alt=sse" if stream else "generateContent"),
        "ollama": "/api/chat",
    }[provider]


def body_for(provider: str, stream: bool, text: str = ASK, tools: bool = True) -> dict[str, Any]:
    """A minimal valid request with one user message and (optionally) a weather tool."""
    if provider == "anthropic":
        body: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": text}],
            "stream": stream,
        }
        if tools:
            body["tools"] = [
                {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "input_schema": WEATHER_SCHEMA,
                }
            ]
        return body
    if provider == "openai":
        body = {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": text}],
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Current weather for a city",
                        "parameters": WEATHER_SCHEMA,
                    },
                }
            ]
        return body
    if provider == "openai_responses":
        body = {"model": "gpt-4o", "input": [{"role": "user", "content": text}], "stream": stream}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                }
            ]
        return body
    if provider == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
        if tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": "get_weather",
                            "description": "Current weather for a city",
                            "parameters": WEATHER_SCHEMA,
                        }
                    ]
                }
            ]
        return body
    body = {"model": "qwen3", "messages": [{"role": "user", "content": text}], "stream": stream}
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": WEATHER_SCHEMA,
                },
            }
        ]
    return body


@pytest.fixture(scope="module")
def client(emulator_server: Emulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emulator_server.url, timeout=10) as http:
        yield http


def post(
    client: httpx.Client,
    provider: str,
    stream: bool,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    return client.post(
        path_for(provider, stream),
        json=body if body is not None else body_for(provider, stream),
        headers={**AUTH[provider], **(headers or {})},
    )


# --- parsing what came back (independently of metis) ---------------------------------------


def sse_events(text: str, sep: str = "\n\n") -> list[tuple[str | None, str]]:
    events: list[tuple[str | None, str]] = []
    for block in text.split(sep):
        if not block.strip():
            continue
        name = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        events.append((name, "\n".join(data)))
    return events


def payloads(provider: str, text: str) -> list[Any]:
    """Every event's JSON, in order (OpenAI's [DONE] kept as the string)."""
    if provider == "ollama":
        return [json.loads(line) for line in text.splitlines() if line]
    sep = "\r\n\r\n" if provider == "gemini" else "\n\n"
    return [data if data == "[DONE]" else json.loads(data) for _, data in sse_events(text, sep)]


def raw_exchange(emulator: Emulator, provider: str, stream: bool) -> tuple[bytes, list[bytes]]:
    """One request over a bare socket: the response head and its body's chunks, as sent."""
    body = json.dumps(body_for(provider, stream, "Tell me about Lyon and Nice", False)).encode()
    headers = "".join(f"{k}: {v}\r\n" for k, v in AUTH[provider].items())
    head = (
        f"POST {path_for(provider, stream)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n{headers}\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=10) as sock:
        sock.sendall(head + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    response_head, _, rest = data.partition(b"\r\n\r\n")
    chunks: list[bytes] = []
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(rest[:size])
        assert rest[size : size + 2] == b"\r\n"
        rest = rest[size + 2 :]
    return response_head, chunks


# --- framing, headers and bodies, per provider ----------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_stream_event_is_its_own_chunk(emulator: Emulator, provider: str) -> None:
    head, chunks = raw_exchange(emulator, provider, stream=True)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"transfer-encoding: chunked" in head.lower()
    assert len(chunks) >= 4
    terminator = {"gemini": b"\r\n\r\n", "ollama": b"\n"}.get(provider, b"\n\n")
    for chunk in chunks:
        assert chunk.endswith(terminator), chunk
        if provider == "ollama":
            assert chunk.count(b"\n") == 1
            json.loads(chunk)
        else:
            assert chunk.count(b"data:") == 1, chunk


def test_anthropic_stream(client: httpx.Client) -> None:
    response = post(client, "anthropic", True, body_for("anthropic", True, "Tell me about Lyon."))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["request-id"].startswith("req_")
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "ping" in names
    for name, data in events:
        assert json.loads(data)["type"] == name  # padded data lines still parse
    texts = [json.loads(d)["delta"]["text"] for n, d in events if n == "content_block_delta"]
    assert len(texts) >= 2 and "".join(texts) == "You said: Tell me about Lyon."
    start = json.loads(events[0][1])["message"]["usage"]  # Anthropic says its tier there alone
    assert start["service_tier"] == "standard"
    assert "service_tier" not in json.loads(events[-2][1])["usage"]
    assert any(
        data != data.rstrip()
        for _, data in (
            (n, line) for n, line in re.findall(r"event: (\w+)\ndata: (.*)\n", response.text)
        )
    )
    start = json.loads(events[0][1])["message"]
    assert start["usage"]["input_tokens"] > 0 and "cache_read_input_tokens" in start["usage"]
    delta = json.loads(events[-2][1])
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] > 1


def test_anthropic_streamed_tool_call_arrives_in_fragments(client: httpx.Client) -> None:
    events = sse_events(post(client, "anthropic", True).text)
    start = next(json.loads(d) for n, d in events if n == "content_block_start")
    assert start["content_block"]["type"] == "tool_use"
    assert (
        start["content_block"]["id"].startswith("toolu_") and start["content_block"]["input"] == {}
    )
    parts = [
        json.loads(d)["delta"]["partial_json"] for n, d in events if n == "content_block_delta"
    ]
    assert parts[0] == "" and len(parts) > 3
    assert json.loads("".join(parts)) == {"city": "Paris"}
    assert json.loads(events[-2][1])["delta"]["stop_reason"] == "tool_use"


def test_anthropic_message_with_thinking(client: httpx.Client) -> None:
    body = {**body_for("anthropic", False), "max_tokens": 2048}
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    response = post(client, "anthropic", False, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    message = response.json()
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["usage"]["service_tier"] == "standard"
    thinking, call = message["content"]
    assert thinking["type"] == "thinking" and thinking["signature"] and thinking["thinking"]
    assert call == {
        "type": "tool_use",
        "id": call["id"],
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert message["stop_reason"] == "tool_use"
    assert set(message["usage"]) >= {
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }
    # the conversation goes on: the signed block goes back, the tool result is used
    body["messages"] += [
        {"role": "assistant", "content": message["content"]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call["id"], "content": "Paris: 21°C, sunny"}
            ],
        },
    ]
    answer = post(client, "anthropic", False, body).json()
    assert answer["content"][-1] == {
        "type": "text",
        "text": "According to get_weather: Paris: 21°C, sunny.",
    }
    # a signature the emulator did not issue is refused, as Anthropic refuses foreign ones
    body["messages"][1]["content"][0]["signature"] = "c2lnbmF0dXJl"
    refused = post(client, "anthropic", False, body)
    assert refused.status_code == 400
    assert "Invalid `signature`" in refused.json()["error"]["message"]


def test_openai_chat_stream(client: httpx.Client) -> None:
    response = post(client, "openai", True)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert "x-request-id" in response.headers
    assert "event:" not in response.text
    chunks = payloads("openai", response.text)
    assert chunks[-1] == "[DONE]"
    usage_chunk, finish = chunks[-2], chunks[-3]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] > 0
    assert finish["choices"][0]["finish_reason"] == "tool_calls"
    fragments = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks[:-3]
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    assert "id" in fragments[0] and fragments[0]["function"]["name"] == "get_weather"
    assert all("id" not in f and "name" not in f["function"] for f in fragments[1:])
    assert len(fragments) > 3
    arguments = "".join(f["function"]["arguments"] for f in fragments)
    assert json.loads(arguments) == {"city": "Paris"}
    assert all(c["object"] == "chat.completion.chunk" and "obfuscation" in c for c in chunks[:-1])


def test_openai_chat_stream_has_no_usage_unless_asked(client: httpx.Client) -> None:
    body = body_for("openai", True, "Hello there", tools=False)
    del body["stream_options"]
    chunks = payloads("openai", post(client, "openai", True, body).text)
    assert all("usage" not in c for c in chunks[:-1])
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1]) == (
        "You said: Hello there"
    )


def test_openai_chat_completion(client: httpx.Client) -> None:
    response = post(client, "openai", False)
    assert response.status_code == 200
    completion = response.json()
    assert completion["object"] == "chat.completion" and completion["id"].startswith("chatcmpl-")
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and json.loads(call["function"]["arguments"]) == {
        "city": "Paris"
    }
    usage = completion["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "cached_tokens" in usage["prompt_tokens_details"]


def test_openai_responses_stream_with_reasoning(client: httpx.Client) -> None:
    body = body_for("openai_responses", True)
    body["model"] = "o4-mini"
    body["reasoning"] = {"effort": "low", "summary": "auto"}
    body["include"] = ["reasoning.encrypted_content"]
    response = post(client, "openai_responses", True, body)
    assert response.status_code == 200
    events = sse_events(response.text)
    names = [n for n, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    datas = [json.loads(d) for _, d in events]
    assert [d["sequence_number"] for d in datas] == list(range(len(datas)))
    assert all(d["type"] == n for (n, _), d in zip(events, datas, strict=True))
    assert "response.reasoning_summary_text.delta" in names
    assert names.count("response.function_call_arguments.delta") > 2
    final = datas[-1]["response"]
    reasoning, call = final["output"]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"].startswith("gAAAA")
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"city": "Paris"}
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] > 0
    # round trip: the reasoning item and the call go back with the output, store off
    follow = {
        **body,
        "stream": False,
        "store": False,
        "input": [
            *body["input"],
            reasoning,
            {k: call[k] for k in ("type", "call_id", "name", "arguments")},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "Paris: 21°C"},
        ],
    }
    answer = post(client, "openai_responses", False, follow)
    assert answer.status_code == 200, answer.text
    message = answer.json()["output"][-1]
    assert message["content"][0]["text"] == "According to get_weather: Paris: 21°C."
    follow["input"][1] = {**reasoning, "encrypted_content": "gAAAAABforged"}
    forged = post(client, "openai_responses", False, follow)
    assert forged.status_code == 400
    assert forged.json()["error"]["code"] == "invalid_encrypted_content"


def test_openai_responses_previous_response_id(client: httpx.Client) -> None:
    first = post(client, "openai_responses", False).json()
    (call,) = first["output"]
    follow = {
        "model": "gpt-4o",
        "previous_response_id": first["id"],
        "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "rainy"}],
    }
    answer = post(client, "openai_responses", False, follow).json()
    assert answer["output"][0]["content"][0]["text"] == "According to get_weather: rainy."
    missing = post(client, "openai_responses", False, {**follow, "previous_response_id": "resp_x"})
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "previous_response_not_found"


def test_gemini_sse_stream(client: httpx.Client) -> None:
    body = body_for("gemini", True)
    body["generationConfig"] = {"thinkingConfig": {"includeThoughts": True}}
    response = post(client, "gemini", True, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert "\r\n\r\n" in response.text and "event:" not in response.text
    chunks = payloads("gemini", response.text)
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert parts[0]["thought"] is True
    (call,) = [p for p in parts if "functionCall" in p]
    assert call["functionCall"] == {"name": "get_weather", "args": {"city": "Paris"}}
    assert "id" not in call["functionCall"] and call["thoughtSignature"]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all("usageMetadata" in c and c["responseId"] for c in chunks)
    assert chunks[-1]["usageMetadata"]["thoughtsTokenCount"] > 0


def test_gemini_generate_content_and_json_array_stream(client: httpx.Client) -> None:
    body = body_for("gemini", False, "Hello Gemini", tools=False)
    response = client.post(path_for("gemini", False) + "?key=test", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=UTF-8"
    result = response.json()
    assert result["candidates"][0]["content"] == {
        "parts": [{"text": "You said: Hello Gemini"}],
        "role": "model",
    }
    usage = result["usageMetadata"]
    assert usage["totalTokenCount"] == (
        usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    )  # 2.5 Flash thinks (and counts it) without being asked to show its thoughts
    streamed = client.post(
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent", json=body, headers=AUTH["gemini"]
    )
    chunks = streamed.json()  # without alt=sse: one JSON array, streamed
    assert isinstance(chunks, list) and len(chunks) >= 2
    text = "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
    assert text == "You said: Hello Gemini"


def test_gemini_function_response_turn(client: httpx.Client) -> None:
    body = body_for("gemini", False)
    body["contents"] += [
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}
            ],
        },
    ]
    result = post(client, "gemini", False, body).json()
    assert result["candidates"][0]["content"]["parts"][0]["text"] == (
        "According to get_weather: sunny."
    )
    body["contents"][2]["parts"].append(body["contents"][2]["parts"][0])
    mismatch = post(client, "gemini", False, body)
    assert mismatch.status_code == 400
    assert mismatch.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "number of function response parts" in mismatch.json()["error"]["message"]


def test_gemini_3_wants_thought_signatures_back(client: httpx.Client) -> None:
    path = "/v1beta/models/gemini-3-pro-preview:generateContent"
    first = client.post(path, json=body_for("gemini", False), headers=AUTH["gemini"]).json()
    part = first["candidates"][0]["content"]["parts"][0]
    assert part["thoughtSignature"]
    body = body_for("gemini", False)
    body["contents"] += [
        {"role": "model", "parts": [part]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}}
            ],
        },
    ]
    assert client.post(path, json=body, headers=AUTH["gemini"]).status_code == 200
    del body["contents"][1]["parts"][0]["thoughtSignature"]
    refused = client.post(path, json=body, headers=AUTH["gemini"])
    assert refused.status_code == 400
    assert "thought_signature" in refused.json()["error"]["message"]


def test_ollama_stream_and_chat(client: httpx.Client) -> None:
    body = body_for("ollama", True, "Count to three", tools=False)
    body["think"] = True
    response = post(client, "ollama", True, body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = payloads("ollama", response.text)
    assert all(line["model"] == "qwen3" and line["created_at"].endswith("Z") for line in lines)
    assert lines[0]["message"]["thinking"] and lines[0]["message"]["content"] == ""
    assert all(not line["done"] for line in lines[:-1])
    final = lines[-1]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["prompt_eval_count"] > 0 and final["eval_count"] > 0 and final["total_duration"]
    text = "".join(line["message"]["content"] for line in lines)
    assert text == "You said: Count to three"
    whole = post(client, "ollama", False).json()
    (call,) = whole["message"]["tool_calls"]
    assert call["function"]["arguments"] == {"city": "Paris"}  # an object, not a string
    assert whole["done"] is True


def test_ollama_management_endpoints(client: httpx.Client) -> None:
    assert client.get("/api/version").json()["version"]
    models = client.get("/api/tags").json()["models"]
    assert {"name", "model", "size", "digest", "details"} <= set(models[0])
    shown = client.post("/api/show", json={"model": "qwen3"}).json()
    assert {"tools", "thinking"} <= set(shown["capabilities"])
    assert client.get("/").text == "Ollama is running"


def test_unknown_path_and_method(client: httpx.Client) -> None:
    assert client.get("/v2/nothing").status_code == 404
    wrong = client.get("/v1/messages")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


def test_keep_alive_reuses_one_connection(emulator: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=10) as sock:
        reader = sock.makefile("rb")
        for _ in range(3):
            sock.sendall(b"GET /api/version HTTP/1.1\r\nHost: x\r\n\r\n")
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert json.loads(reader.read(length))["version"]


# --- auth and validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "status", "check"),
    [
        ("anthropic", 401, lambda b: b["error"]["type"] == "authentication_error"),
        ("openai", 401, lambda b: "API key" in b["error"]["message"]),
        ("openai_responses", 401, lambda b: "API key" in b["error"]["message"]),
        ("gemini", 403, lambda b: b["error"]["status"] == "PERMISSION_DENIED"),
    ],
)
def test_missing_credentials(client: httpx.Client, provider: str, status: int, check: Any) -> None:
    response = client.post(path_for(provider, False), json=body_for(provider, False))
    assert response.status_code == status
    assert check(response.json())


def test_anthropic_needs_a_version_header(client: httpx.Client) -> None:
    response = client.post(
        "/v1/messages", json=body_for("anthropic", False), headers={"x-api-key": "k"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": "anthropic-version: header is required",
    }


def test_only_the_configured_keys_pass() -> None:
    with Emulator(api_keys=["good"]) as emulator, httpx.Client(base_url=emulator.url) as http:
        ok = http.post(
            "/v1/chat/completions",
            json=body_for("openai", False),
            headers={"authorization": "Bearer good"},
        )
        bad = http.post(
            "/v1/chat/completions",
            json=body_for("openai", False),
            headers={"authorization": "Bearer wrong-key-123"},
        )
        gemini = http.post(path_for("gemini", False) + "?key=nope", json=body_for("gemini", False))
    assert ok.status_code == 200
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"
    assert gemini.status_code == 400
    assert gemini.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


@pytest.mark.parametrize(
    ("provider", "mutate", "fragment"),
    [
        ("anthropic", lambda b: _without(b, "max_tokens"), "max_tokens: Field required"),
        ("anthropic", lambda b: {**b, "messages": []}, "at least one message"),
        ("anthropic", lambda b: {**b, "n": 2}, "Extra inputs are not permitted"),
        (
            "anthropic",
            lambda b: {
                **b,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_x", "content": "hi"}
                        ],
                    }
                ],
            },
            "unexpected `tool_use_id`",
        ),
        (
            "anthropic",
            lambda b: {
                **b,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "toolu_1",
                                "name": "get_weather",
                                "input": {},
                            }
                        ],
                    },
                    {"role": "user", "content": "and?"},
                ],
            },
            "without `tool_result` blocks",
        ),
        (
            "anthropic",
            lambda b: {**b, "thinking": {"type": "enabled", "budget_tokens": 4096}},
            "must be greater than `thinking.budget_tokens`",
        ),
        ("openai", lambda b: _without(b, "messages"), "Missing required parameter: 'messages'"),
        (
            "openai",
            lambda b: {
                **b,
                "messages": [{"role": "tool", "tool_call_id": "call_1", "content": "x"}],
            },
            "must be a response to a preceeding message",
        ),
        (
            "openai",
            lambda b: {
                **b,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "user", "content": "and?"},
                ],
            },
            "did not have response messages: call_1",
        ),
        (
            "openai",
            lambda b: {
                **b,
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "strict": True, "parameters": WEATHER_SCHEMA},
                    }
                ],
            },
            "'additionalProperties' is required",
        ),
        (
            "openai",
            lambda b: {**_without(b, "stream"), "stream_options": {"include_usage": True}},
            "only allowed when 'stream' is enabled",
        ),
        (
            "openai_responses",
            lambda b: {
                **b,
                "input": [{"type": "function_call_output", "call_id": "call_9", "output": "x"}],
            },
            "No tool call found",
        ),
        (
            "openai_responses",
            lambda b: {**b, "tools": [{"type": "function", "function": {"name": "get_weather"}}]},
            "tools[0].name",
        ),
        ("openai_responses", lambda b: {**b, "temperature": -1}, "decimal below minimum"),
        ("gemini", lambda b: {**b, "contents": []}, "contents is not specified"),
        (
            "gemini",
            lambda b: {**b, "contents": [{"role": "user", "parts": [{"txt": "hi"}]}]},
            'Unknown name "txt"',
        ),
        ("ollama", lambda b: _without(b, "model"), "model is required"),
        ("ollama", lambda b: {**b, "model": "gemma3:1b"}, "does not support tools"),
    ],
)
def test_invalid_requests_get_the_providers_400(
    client: httpx.Client, provider: str, mutate: Any, fragment: str
) -> None:
    response = post(client, provider, False, mutate(body_for(provider, False)))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    message = error if isinstance(error, str) else error["message"]
    assert fragment in message
    if provider == "anthropic":
        assert response.json()["type"] == "error" and error["type"] == "invalid_request_error"
    elif provider.startswith("openai"):
        assert error["type"] == "invalid_request_error" and "param" in error and "code" in error
    elif provider == "gemini":
        assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400


# --- faults ---------------------------------------------------------------------------------

STATUS_FAULTS = {
    "anthropic": {
        "rate_limit": (429, "rate_limit_error"),
        "overloaded": (529, "overloaded_error"),
        "server_error": (500, "api_error"),
        "auth": (401, "authentication_error"),
        "context_overflow": (400, "invalid_request_error"),
    },
    "openai": {
        "rate_limit": (429, "rate_limit_exceeded"),
        "overloaded": (503, None),
        "server_error": (500, None),
        "auth": (401, "invalid_api_key"),
        "context_overflow": (400, "context_length_exceeded"),
    },
    "gemini": {
        "rate_limit": (429, "RESOURCE_EXHAUSTED"),
        "overloaded": (503, "UNAVAILABLE"),
        "server_error": (500, "INTERNAL"),
        "auth": (400, "INVALID_ARGUMENT"),
        "context_overflow": (400, "INVALID_ARGUMENT"),
    },
    "ollama": {
        "rate_limit": (429, None),
        "overloaded": (503, None),
        "server_error": (500, None),
        "auth": (401, None),
        "context_overflow": (400, None),
    },
}
STATUS_FAULTS["openai_responses"] = STATUS_FAULTS["openai"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "kind", ["rate_limit", "overloaded", "server_error", "auth", "context_overflow"]
)
def test_status_faults_in_each_providers_format(
    client: httpx.Client, emulator: Emulator, provider: str, kind: str
) -> None:
    response = post(client, provider, True, headers={"x-emulator-fault": f"{kind}=2"})
    status, code = STATUS_FAULTS[provider][kind]
    assert response.status_code == status
    body = response.json()
    if provider == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == code
    elif provider.startswith("openai"):
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert code is None or body["error"]["code"] == code
    elif provider == "gemini":
        assert body["error"]["status"] == code and body["error"]["code"] == status
    else:
        assert isinstance(body["error"], str)
    if kind == "rate_limit" and provider != "gemini":
        assert response.headers["retry-after"] == "2"
    if kind == "rate_limit" and provider == "gemini":  # Gemini says it in a RetryInfo detail
        assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"} in (
            body["error"]["details"]
        )
    if kind == "context_overflow":
        message = body["error"] if isinstance(body["error"], str) else body["error"]["message"]
        assert re.search(r"too long|context|exceeds", message)
    assert emulator.stats.faults == {kind: 1}


def _stream_text(response: httpx.Response) -> tuple[str, Exception | None]:
    received = b""
    try:
        for chunk in response.iter_bytes():
            received += chunk
    except httpx.HTTPError as exc:
        return received.decode(), exc
    return received.decode(), None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_drop_closes_the_stream_after_n_events(client: httpx.Client, provider: str) -> None:
    headers = {**AUTH[provider], "x-emulator-fault": "drop=3"}
    body = body_for(provider, True, "Tell me about Lyon and Nice", tools=False)
    with client.stream("POST", path_for(provider, True), json=body, headers=headers) as response:
        assert response.status_code == 200
        text, error = _stream_text(response)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert len(payloads(provider, text)) == 3


def test_drop_without_a_stream_sends_no_response(client: httpx.Client) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        post(client, "anthropic", False, headers={"x-emulator-fault": "drop"})


@pytest.mark.parametrize("provider", PROVIDERS)
def test_in_stream_error(client: httpx.Client, provider: str) -> None:
    response = post(client, provider, True, headers={"x-emulator-fault": "stream_error;after=2"})
    assert response.status_code == 200
    events = payloads(provider, response.text)
    assert len(events) == 3
    last = events[-1]
    if provider == "anthropic":
        assert sse_events(response.text)[-1][0] == "error"
        assert last["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    elif provider == "openai":
        assert last["error"]["type"] == "server_error"
    elif provider == "openai_responses":
        assert last["type"] == "response.failed" and last["response"]["status"] == "failed"
        assert last["response"]["error"]["code"] == "server_error"
    elif provider == "gemini":
        assert last["error"]["status"] == "UNAVAILABLE"
    else:
        assert "busy" in last["error"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_chunk(client: httpx.Client, provider: str) -> None:
    response = post(client, provider, True, headers={"x-emulator-fault": "malformed;after=1"})
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        payloads(provider, response.text)
    good = payloads(provider, post(client, provider, True).text)
    text = response.text
    broken = (
        text.splitlines()
        if provider == "ollama"
        else [d for _, d in sse_events(text, "\r\n\r\n" if provider == "gemini" else "\n\n")]
    )
    assert len(broken) == len(good)  # the one event is cut, the stream goes on
    bad = [i for i, item in enumerate(broken) if not _parses(item)]
    assert bad == [1]


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return text == "[DONE]"
    return True


def test_malformed_body_without_a_stream(client: httpx.Client) -> None:
    response = post(client, "openai", False, headers={"x-emulator-fault": "malformed"})
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_stall_keeps_the_connection_open_then_resumes(emulator: Emulator) -> None:
    # a stall far longer than the client's read timeout (the emulator's close ends it)
    stalled = {**AUTH["openai"], "x-emulator-fault": "stall=30;after=1"}
    headers = {**AUTH["openai"], "x-emulator-fault": "stall=0.6;after=1"}
    with (
        httpx.Client(base_url=emulator.url, timeout=httpx.Timeout(5, read=0.2)) as http,
        http.stream(
            "POST", path_for("openai", True), json=body_for("openai", True), headers=stalled
        ) as response,
    ):
        chunks = response.iter_bytes()
        assert b"data:" in next(chunks)
        with pytest.raises(httpx.ReadTimeout):
            next(chunks)
    with httpx.Client(base_url=emulator.url, timeout=60) as http:  # a bound on a hang
        started = time.monotonic()
        text = http.post(
            path_for("openai", True), json=body_for("openai", True), headers=headers
        ).text
        assert time.monotonic() - started >= 0.6
    assert payloads("openai", text)[-1] == "[DONE]"


def test_slow_stream(client: httpx.Client) -> None:
    started = time.monotonic()
    response = post(client, "ollama", True, headers={"x-emulator-fault": "slow=0.02"})
    events = payloads("ollama", response.text)
    assert time.monotonic() - started >= 0.02 * len(events)
    assert events[-1]["done"] is True


def test_bad_fault_header_is_a_400(client: httpx.Client) -> None:
    response = post(client, "openai", False, headers={"x-emulator-fault": "explode"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "emulator_error"


def test_fault_specs() -> None:
    assert [str(f) for f in parse_faults("429, drop=3, stall=1.5;after=0, slow")] == [
        "rate_limit",
        "drop=3",
        "stall=1.5;after=0",
        "slow",
    ]
    for bad in ("nope", "drop=x", "stall=1;before=2", "stream_error=weird"):
        with pytest.raises(FaultSpecError):
            parse_faults(bad)
    with pytest.raises(FaultSpecError):
        FaultPlan.parse("rate_limit:0.7,overloaded:0.6")
    plan = FaultPlan.parse("overloaded@1,drop=2@3-4,rate_limit:0.5", seed=9)
    assert [f.kind for f in plan.pick(1)][:1] == ["overloaded"]
    assert [f.kind for f in plan.pick(3)][:1] == ["drop"]
    again = FaultPlan.parse("overloaded@1,drop=2@3-4,rate_limit:0.5", seed=9)
    assert [plan.pick(n) for n in range(1, 50)] == [again.pick(n) for n in range(1, 50)]


def _statuses(emulator: Emulator, count: int) -> list[int]:
    """``count`` requests handed to ``emulator`` in process (its faults are its handler's)."""
    with httpx.Client(transport=emulator.transport(), base_url="http://emulator") as http:
        return [post(http, "openai", False).status_code for _ in range(count)]


def test_run_level_fault_rates_are_seeded() -> None:
    spec = "rate_limit=0:0.3,overloaded:0.2"
    first = Emulator(faults=spec, seed=5)
    one = _statuses(first, 60)
    stats = first.stats
    two = _statuses(Emulator(faults=spec, seed=5), 60)
    three = _statuses(Emulator(faults=spec, seed=6), 60)
    assert one == two and one != three
    assert 8 <= one.count(429) <= 30 and 4 <= one.count(503) <= 22 and one.count(200) >= 15
    assert stats.requests == 60
    assert stats.faults == {"rate_limit": one.count(429), "overloaded": one.count(503)}
    assert stats.by_status[200] == one.count(200)


def test_scheduled_and_queued_faults(emulator: Emulator, client: httpx.Client) -> None:
    assert _statuses(Emulator(faults="overloaded@1+3"), 4) == [503, 200, 503, 200]
    emulator.push_fault("rate_limit", times=2, provider="anthropic")
    assert post(client, "openai", False).status_code == 200  # not for this provider
    assert post(client, "anthropic", False).status_code == 429
    assert post(client, "anthropic", False, headers={"x-emulator-fault": "none"}).status_code == 200
    assert post(client, "anthropic", False).status_code == 429
    assert post(client, "anthropic", False).status_code == 200
    assert emulator.faults_injected == 2 and emulator.requests_served == 5
    assert [r.faults for r in emulator.requests] == [[], ["rate_limit"], [], ["rate_limit"], []]


# --- determinism, the prompt cache, records -------------------------------------------------


def _normalized(text: str) -> str:
    return re.sub(r'"created(_at)?":\s*("[^"]*"|\d+)', '"created":0', text)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True])
def test_same_request_same_reply(client: httpx.Client, provider: str, stream: bool) -> None:
    first = post(client, provider, stream)
    second = post(client, provider, stream)
    assert first.status_code == second.status_code == 200
    assert _normalized(first.text) == _normalized(second.text)


def test_anthropic_cache_breakpoints_report_writes_then_reads(client: httpx.Client) -> None:
    body = body_for("anthropic", False)
    body["system"] = [
        {"type": "text", "text": "You are precise. " * 400, "cache_control": {"type": "ephemeral"}}
    ]
    first = post(client, "anthropic", False, body).json()["usage"]
    second = post(client, "anthropic", False, body).json()["usage"]
    assert first["cache_creation_input_tokens"] > 1024 and first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] == first["input_tokens"]


def test_openai_prefix_cache(client: httpx.Client) -> None:
    body = body_for("openai", False, tools=False)
    body["messages"].insert(0, {"role": "system", "content": "Be brief. " * 600})
    first = post(client, "openai", False, body).json()["usage"]
    body["messages"] += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "x"}]
    second = post(client, "openai", False, body).json()["usage"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 1024 and cached % 128 == 0 and cached < second["prompt_tokens"]


def test_context_window_overflow_for_real() -> None:
    with (
        Emulator(context_tokens={"anthropic": 50, "openai": 50}) as emulator,
        httpx.Client(base_url=emulator.url) as http,
    ):
        long = "word " * 400
        anthropic = post(http, "anthropic", False, body_for("anthropic", False, long))
        openai = post(http, "openai", False, body_for("openai", False, long))
    assert anthropic.status_code == 400
    assert "prompt is too long" in anthropic.json()["error"]["message"]
    assert openai.json()["error"]["code"] == "context_length_exceeded"


def test_requests_are_recorded(emulator: Emulator, client: httpx.Client) -> None:
    post(client, "openai", False)
    (record,) = emulator.requests
    assert record.provider == "openai" and record.status == 200
    assert record.json()["model"] == "gpt-4o" and record.headers["authorization"] == "Bearer test"


@pytest.mark.anyio
async def test_concurrent_streams_from_an_event_loop(emulator: Emulator) -> None:
    import anyio

    results: list[int] = []

    async def one(http: httpx.AsyncClient, provider: str) -> None:
        path = path_for(provider, True)
        body = body_for(provider, True)
        async with http.stream("POST", path, json=body, headers=AUTH[provider]) as response:
            text = (await response.aread()).decode()
        assert payloads(provider, text)
        results.append(response.status_code)

    async with (
        httpx.AsyncClient(base_url=emulator.url, timeout=10) as http,
        anyio.create_task_group() as tasks,
    ):
        for i in range(40):
            tasks.start_soon(one, http, PROVIDERS[i % len(PROVIDERS)])
    assert results == [200] * 40
    assert emulator.stats.requests == 40
    assert emulator.stats.by_provider == dict.fromkeys(PROVIDERS, 8)


def test_base_url_names_providers(emulator: Emulator) -> None:
    assert emulator.base_url("anthropic") == emulator.url == f"http://127.0.0.1:{emulator.port}"
    with pytest.raises(ValueError):
        emulator.base_url("nobody")


@pytest.mark.slow
def test_command_line_serves_until_terminated() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "metis.testing.emulator", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        url = re.search(r"http://[\d.]+:\d+", process.stdout.readline()).group(0)  # type: ignore[union-attr]
        assert httpx.get(url + "/api/version").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    assert "served 1 requests" in out


# --- metis end to end -----------------------------------------------------------------------

E2E_MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
}
E2E_CAPABILITIES: dict[str, dict[str, Any]] = {"ollama": {"supports_tools": True}}


def _stack_exists(provider: str) -> bool:
    return (ROOT / "metis" / "stacks" / "builtin" / f"{provider}.yaml").exists()


def _adapter(provider: str, emulator: Emulator, **config: Any) -> Any:
    from metis import AdapterConfig, build_adapter

    if not _stack_exists(provider):
        pytest.skip(f"metis/stacks/builtin/{provider}.yaml does not exist yet")
    return build_adapter(
        provider,
        AdapterConfig(
            api_key="test",
            base_url=emulator.base_url(provider),
            capabilities=E2E_CAPABILITIES.get(provider, {}),
            **config,
        ),
    )


def _request(provider: str, history: list[Any]) -> Any:
    from metis import CanonicalRequest, ToolDefinition

    weather = ToolDefinition(
        name="get_weather", description="Current weather for a city", input_schema=WEATHER_SCHEMA
    )
    return CanonicalRequest(
        model=E2E_MODELS[provider],
        session_id="emulator-e2e",
        system_prompt="You are a weather assistant.",
        messages=history,
        tools=[weather],
        max_output_tokens=1024,
    )


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "complete"])
async def test_metis_conversation_with_a_tool_call(
    emulator: Emulator, provider: str, streamed: bool
) -> None:
    from metis import Message, MessageComplete, TextDelta, ToolResultBlock, ToolUseEnd

    adapter = _adapter(provider, emulator)
    history = [Message.user("What's the weather in Paris and in Rome, in Celsius?")]
    async with adapter:
        request = _request(provider, history)
        if streamed:
            events = [event async for event in adapter.stream(request)]
            ends = [e for e in events if isinstance(e, ToolUseEnd)]
            assert [e.final_input for e in ends] == [
                {"city": "Paris", "unit": "celsius"},
                {"city": "Rome", "unit": "celsius"},
            ]
            final = events[-1]
            assert isinstance(final, MessageComplete)
            content, usage = final.final_content, final.usage
        else:
            response = await adapter.complete(request)
            content, usage = response.content, response.usage
        calls = [b for b in content if b.type == "tool_use"]
        assert [c.name for c in calls] == ["get_weather", "get_weather"]  # type: ignore[union-attr]
        assert usage.input_tokens > 0 and usage.output_tokens > 0 and not usage.estimated
        history += [
            Message.assistant(*content),
            Message.tool(
                *[
                    ToolResultBlock(tool_use_id=c.id, content=f"{c.input['city']}: 21°C")  # type: ignore[union-attr]
                    for c in calls
                ]
            ),
        ]
        request = _request(provider, history)
        if streamed:
            text = "".join(
                [e.text async for e in adapter.stream(request) if isinstance(e, TextDelta)]
            )
        else:
            text = "".join(
                b.text for b in (await adapter.complete(request)).content if b.type == "text"
            )  # type: ignore[union-attr]
    assert text == "According to get_weather: Paris: 21°C. According to get_weather: Rome: 21°C."
    calls = [r for r in emulator.requests if r.method == "POST" and r.path != "/api/show"]
    assert [r.status for r in calls] == [200, 200]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_metis_retries_a_rate_limit(emulator: Emulator, provider: str) -> None:
    from metis import Message

    emulator.push_fault("rate_limit=0", provider=provider)
    async with _adapter(provider, emulator) as adapter:
        response = await adapter.complete(_request(provider, [Message.user("Hello")]))
    assert response.content[0].text == "You said: Hello"  # type: ignore[union-attr]
    assert [r.status for r in emulator.requests] == [429, 200]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("fault", ["stream_error;after=3", "drop=3"])
async def test_metis_reports_a_broken_stream(emulator: Emulator, provider: str, fault: str) -> None:
    from metis import AdapterError, ErrorClass, Message, MessageComplete

    adapter = _adapter(provider, emulator, max_retries=0, extra_headers={"x-emulator-fault": fault})
    seen: list[Any] = []
    async with adapter:
        with pytest.raises(AdapterError) as raised:
            async for event in adapter.stream(
                _request(provider, [Message.user("Tell me a story")])
            ):
                seen.append(event)
    expected = (
        {ErrorClass.NETWORK}
        if fault.startswith("drop")
        else {ErrorClass.OVERLOADED, ErrorClass.SERVER_ERROR}
    )
    assert raised.value.error_class in expected
    assert isinstance(seen[-1], MessageComplete)
    assert seen[-1].stop_reason.kind.value == "error"


COMPATIBLE_MODELS = {
    "deepseek": "deepseek:deepseek-chat",
    "groq": "groq:llama-3.3-70b-versatile",
    "mistral": "mistral:mistral-large-latest",
    "openrouter": "openrouter:openai/gpt-4o",
    "together": "together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "vllm": "vllm:qwen",
    "llamacpp": "llamacpp:local",
    "tgi": "tgi:tgi",  # tools offered in the system prompt (tool_shim): calls come as tags
}


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("provider", sorted(COMPATIBLE_MODELS))
async def test_metis_openai_compatible_stacks(emulator: Emulator, provider: str) -> None:
    from metis import (
        AdapterConfig,
        CanonicalRequest,
        Message,
        ToolDefinition,
        ToolResultBlock,
        build_adapter,
    )

    if not _stack_exists(provider):
        pytest.skip(f"metis/stacks/builtin/{provider}.yaml does not exist yet")
    weather = ToolDefinition(
        name="get_weather", description="Current weather for a city", input_schema=WEATHER_SCHEMA
    )
    config = AdapterConfig(
        api_key="test", base_url=emulator.base_url(provider), capabilities={"supports_tools": True}
    )
    history = [Message.user("What's the weather in Paris?")]
    async with build_adapter(provider, config) as adapter:

        def request() -> CanonicalRequest:
            return CanonicalRequest(
                model=COMPATIBLE_MODELS[provider],
                messages=history,
                tools=[weather],
                max_output_tokens=500,
            )

        first = await adapter.complete(request())
        (call,) = [b for b in first.content if b.type == "tool_use"]
        assert call.input == {"city": "Paris"}  # type: ignore[union-attr]
        history += [
            Message.assistant(*first.content),
            Message.tool(ToolResultBlock(tool_use_id=call.id, content="sunny")),
        ]  # type: ignore[union-attr]
        second = await adapter.complete(request())
    assert second.content[0].text == "According to get_weather: sunny."  # type: ignore[union-attr]


def test_a_client_dropping_a_kept_alive_connection_prints_no_traceback(
    capfd: pytest.CaptureFixture[str],
) -> None:
    import socket
    import struct
    import time

    with Emulator(port=0) as server:
        body = json.dumps(
            {
                "model": "claude-sonnet-4-5",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        head = (
            "POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: k\r\n"
            "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        conn = socket.create_connection((server.host, server.port))
        conn.sendall(head.encode() + body)
        assert conn.recv(65536).startswith(b"HTTP/1.1 200")
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # a reset while the server waits for the next request on it
        time.sleep(0.3)
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Weather in Paris?", ["Paris"]),  # a sentence's first word is not a place for that
        ("Hotels near Rome. Tokyo in spring?", ["Rome", "Tokyo"]),
        ("What about the weather in Tokyo and Oslo?", ["Tokyo", "Oslo"]),
        ("I live in New York.", ["New York"]),
        ("One more: the weather in Lisbon?", ["Lisbon"]),  # metis demo's turn 8 asked for "One"
        ("Another one: Madrid?", ["Madrid"]),
    ],
)
def test_the_scripted_model_does_not_take_every_capitalised_word_for_a_name(
    text: str, names: list[str]
) -> None:
    from metis.testing.emulator.words import proper_nouns as _proper_nouns

    assert _proper_nouns(text, set()) == names
