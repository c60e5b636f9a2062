"""What the endpoints beside a model turn answer agrees with the rest, as the providers' do: a
token count is what the same request's reply reports as its input, and a model fetched alone
is its entry in the model list."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator

# Three messages whose lengths are not multiples of four: a count rounded once over their
# sum differs from the per-message counts the usage adds up.
MESSAGES = ["Weather in Oslo today?", "It is cold.", "And in Bergen, tomorrow morning?"]
ROLES = ["user", "assistant", "user"]


def _anthropic(client: httpx.Client) -> tuple[int, int]:
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    messages = [{"role": r, "content": m} for r, m in zip(ROLES, MESSAGES, strict=True)]
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "messages": messages}
    counted = client.post("/v1/messages/count_tokens", json=body, headers=headers)
    answered = client.post("/v1/messages", json={**body, "max_tokens": 64}, headers=headers)
    return counted.json()["input_tokens"], answered.json()["usage"]["input_tokens"]


def _responses(client: httpx.Client) -> tuple[int, int]:
    headers = {"authorization": "Bearer k"}
    items = [{"role": r, "content": m} for r, m in zip(ROLES, MESSAGES, strict=True)]
    body = {"model": "gpt-4.1", "input": items}
    counted = client.post("/v1/responses/input_tokens", json=body, headers=headers)
    answered = client.post("/v1/responses", json=body, headers=headers)
    return counted.json()["input_tokens"], answered.json()["usage"]["input_tokens"]


def _gemini(client: httpx.Client) -> tuple[int, int]:
    headers = {"x-goog-api-key": "k"}
    contents = [
        {"role": "model" if r == "assistant" else "user", "parts": [{"text": m}]}
        for r, m in zip(ROLES, MESSAGES, strict=True)
    ]
    path = "/v1beta/models/gemini-2.5-flash"
    counted = client.post(f"{path}:countTokens", json={"contents": contents}, headers=headers)
    answered = client.post(f"{path}:generateContent", json={"contents": contents}, headers=headers)
    return counted.json()["totalTokens"], answered.json()["usageMetadata"]["promptTokenCount"]


@pytest.mark.parametrize("ask", [_anthropic, _responses, _gemini])
def test_the_count_is_the_replys_input_tokens(ask: Any) -> None:
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as client:
        counted, used = ask(client)
    assert counted == used > 0


MODEL_LISTS = [
    ("/v1/models", {"x-api-key": "k", "anthropic-version": "2023-06-01"}, "data", "id", ""),
    ("/v1/models", {"authorization": "Bearer k"}, "data", "id", ""),
    ("/v1beta/models", {"x-goog-api-key": "k"}, "models", "name", "models/"),
]


@pytest.mark.parametrize(("path", "headers", "key", "field", "prefix"), MODEL_LISTS)
def test_a_model_fetched_alone_is_its_entry_in_the_list(
    path: str, headers: dict[str, str], key: str, field: str, prefix: str
) -> None:
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as client:
        listed = client.get(path, headers=headers).json()[key]
        for entry in listed[:3]:
            alone = client.get(f"{path}/{entry[field].removeprefix(prefix)}", headers=headers)
            assert alone.json() == entry


def _batch(content: bytes) -> httpx.Response:
    transport = Emulator().transport()
    with httpx.Client(transport=transport, base_url="http://emulator") as client:
        headers = {"authorization": "Bearer k"}
        files = {"file": ("batch.jsonl", content)}
        uploaded = client.post("/v1/files", files=files, data={"purpose": "batch"}, headers=headers)
        asked = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}
        body = {"input_file_id": uploaded.json()["id"], **asked}
        return client.post("/v1/batches", json=body, headers=headers)


def test_a_batch_file_is_split_at_its_line_ends_only() -> None:
    item = {
        "custom_id": "one",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "a\u2028b"}]},
    }
    created = _batch(json.dumps(item, ensure_ascii=False).encode() + b"\n")
    assert created.status_code == 200
    assert created.json()["request_counts"]["total"] == 1


def test_a_batch_file_that_is_not_utf8_is_refused_as_invalid_json() -> None:
    refused = _batch(b'{"custom_id": "\xff"}\n')
    assert refused.status_code == 400
    assert "not valid JSON" in refused.json()["error"]["message"]
