"""The emulator's compaction forms: what each API refuses of them (one case per rule, each
breaking one rule of a request the emulator accepts), the compaction block or item a reply
holds past the trigger, and ``POST /v1/responses/compact``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from metis.testing.emulator.formats.compaction import seal
from metis.testing.emulator.formats.responses_rules import encrypt

ANTHROPIC = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
BETA = {**ANTHROPIC, "anthropic-beta": "compact-2026-01-12"}
OPENAI = {"authorization": "Bearer k"}
EDIT = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
LONG = "The harbour was busy that morning, and every boat came in with fish. " * 3000


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with Emulator() as emulator, httpx.Client(base_url=emulator.url, timeout=30) as client:
        yield client


def messages(**fields: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi"}],
        **fields,
    }


def responses(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "input": "hi", **fields}


def error_of(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    return str(response.json()["error"]["message"])


def compaction_turn(block: dict[str, Any], role: str = "assistant") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "hi"},
        {"role": role, "content": [block, {"type": "text", "text": "Hello."}]},
        {"role": "user", "content": "And then?"},
    ]


def test_the_valid_compaction_forms_are_accepted(http: httpx.Client) -> None:
    management = {"edits": [EDIT]}
    assert (
        http.post(
            "/v1/messages", json=messages(context_management={"edits": []}), headers=ANTHROPIC
        ).status_code
        == 200
    )
    block = {"type": "compaction", "content": "Summary."}
    failed = {"type": "compaction", "content": None}
    for body in (
        messages(context_management=management),
        messages(messages=compaction_turn(block)),
        messages(messages=compaction_turn(failed)),
    ):
        assert http.post("/v1/messages", json=body, headers=BETA).status_code == 200
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": seal("Summary.")}
    threshold = [{"type": "compaction", "compact_threshold": 1000}]
    for body in (
        responses(context_management=threshold),
        responses(input=[{"role": "user", "content": "hi"}, item]),
    ):
        assert http.post("/v1/responses", json=body, headers=OPENAI).status_code == 200


@pytest.mark.parametrize(
    ("body", "headers", "message"),
    [
        (messages(context_management={"edits": [EDIT]}), ANTHROPIC, "anthropic-beta"),
        (messages(context_management={"edits": "compact"}), BETA, "a valid list"),
        (messages(context_management=[EDIT]), BETA, "a valid list"),
        (messages(context_management={"edits": [{"type": "compact"}]}), BETA, "expected tags"),
        (
            messages(context_management={"edits": [{**EDIT, "trigger": {"value": 60_000}}]}),
            BETA,
            "'input_tokens'",
        ),
        (
            messages(
                context_management={
                    "edits": [{**EDIT, "trigger": {"type": "input_tokens", "value": 1000}}]
                }
            ),
            BETA,
            "greater than or equal to 50000",
        ),
        (
            messages(context_management={"edits": [{**EDIT, "keep": 3}]}),
            BETA,
            "Extra inputs",
        ),
        (
            messages(messages=compaction_turn({"type": "compaction", "content": ""})),
            ANTHROPIC,
            "non-empty string or null",
        ),
        (
            messages(messages=compaction_turn({"type": "compaction"})),
            ANTHROPIC,
            "Field required",
        ),
        (
            messages(messages=compaction_turn({"type": "compaction", "content": "S"}, "user")),
            ANTHROPIC,
            "can only be in `assistant` messages",
        ),
    ],
)
def test_anthropic_refuses_a_malformed_compaction_form(
    body: dict[str, Any], headers: dict[str, str], message: str, http: httpx.Client
) -> None:
    assert message in error_of(http.post("/v1/messages", json=body, headers=headers))


FORGED = {"type": "compaction", "id": "cmp_1", "encrypted_content": encrypt("Summary.")}


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/responses", responses(context_management={"type": "compaction"}), "an array"),
        ("/v1/responses", responses(context_management=[{"type": "trim"}]), "'compaction'"),
        (
            "/v1/responses",
            responses(context_management=[{"type": "compaction", "compact_threshold": 0}]),
            "at least 1",
        ),
        (
            "/v1/responses",
            responses(context_management=[{"type": "compaction", "after": 3}]),
            "Unknown parameter",
        ),
        (
            "/v1/responses",
            responses(input=[{"role": "user", "content": "hi"}, {"type": "compaction"}]),
            "encrypted_content",
        ),
        (
            "/v1/responses",
            responses(input=[{"role": "user", "content": "hi"}, FORGED]),
            "could not be verified",
        ),
        ("/v1/responses/compact", responses(stream=True), "Unknown parameter: 'stream'"),
        ("/v1/responses/compact", {"input": "hi"}, "model"),
    ],
)
def test_responses_refuses_a_malformed_compaction_form(
    path: str, body: dict[str, Any], message: str, http: httpx.Client
) -> None:
    assert message in error_of(http.post(path, json=body, headers=OPENAI))


def test_an_anthropic_reply_past_the_trigger_opens_with_a_compaction_block(
    http: httpx.Client,
) -> None:
    body = messages(
        messages=[{"role": "user", "content": LONG}], context_management={"edits": [EDIT]}
    )
    reply = http.post("/v1/messages", json=body, headers=BETA).json()
    assert reply["content"][0]["type"] == "compaction"
    assert reply["content"][0]["content"].startswith("Summary of 1 earlier turns.")
    short = http.post(
        "/v1/messages", json=messages(context_management={"edits": [EDIT]}), headers=BETA
    )
    assert all(b["type"] != "compaction" for b in short.json()["content"])


def test_a_responses_reply_past_the_threshold_opens_with_a_compaction_item(
    http: httpx.Client,
) -> None:
    threshold = [{"type": "compaction", "compact_threshold": 10}]
    reply = http.post(
        "/v1/responses",
        json=responses(input=LONG[:400], context_management=threshold),
        headers=OPENAI,
    ).json()
    item = reply["output"][0]
    assert item["type"] == "compaction" and item["id"].startswith("cmp_")
    again = [{"role": "user", "content": LONG[:4000]}, item, {"role": "user", "content": "More?"}]
    later = responses(input=again, context_management=[{**threshold[0], "compact_threshold": 600}])
    answer = http.post("/v1/responses", json=later, headers=OPENAI)
    assert answer.status_code == 200  # its item accepted; read from it on, under the threshold
    assert [i["type"] for i in answer.json()["output"]] == ["message"]


def test_the_compact_endpoint_answers_the_user_messages_and_one_compaction_item(
    http: httpx.Client,
) -> None:
    conversation = [
        {"role": "user", "content": "Describe the harbour."},
        {"role": "assistant", "content": "Busy."},
        {"role": "user", "content": [{"type": "input_text", "text": "And the boats?"}]},
    ]
    answer = http.post(
        "/v1/responses/compact", json=responses(input=conversation), headers=OPENAI
    ).json()
    assert answer["object"] == "response.compaction"
    assert [i.get("role") for i in answer["output"]] == ["user", "user", None]
    assert answer["output"][-1]["type"] == "compaction"
    assert answer["usage"]["input_tokens"] > 0


# Usage: what the model read ------------------------------------------------------------------


def test_a_compacted_anthropic_reply_reports_each_pass_as_the_api_does(
    http: httpx.Client,
) -> None:
    """Anthropic's compaction docs ("Understanding usage"): the compaction pass reads the whole
    conversation; the message pass then reads the summary, not the conversation; the top-level
    counts are the message pass's only."""
    body = messages(
        messages=[{"role": "user", "content": LONG}], context_management={"edits": [EDIT]}
    )
    reply = http.post("/v1/messages", json=body, headers=BETA).json()
    usage, block = reply["usage"], reply["content"][0]
    compaction, message = usage["iterations"]
    assert compaction["type"] == "compaction" and message["type"] == "message"
    assert compaction["input_tokens"] >= len(LONG) // 4  # the conversation, read whole
    assert compaction["output_tokens"] == (len(block["content"]) + 3) // 4  # the summary
    assert message["input_tokens"] < 1_000  # the summary (and the empty tools and system)
    assert message["input_tokens"] >= (len(block["content"]) + 3) // 4
    assert {k: usage[k] for k in ("input_tokens", "output_tokens")} == {
        "input_tokens": message["input_tokens"],
        "output_tokens": message["output_tokens"],
    }


def test_a_reply_after_a_compaction_counts_the_input_from_it_on(http: httpx.Client) -> None:
    """What precedes the latest compaction block or item is not read, so not counted."""
    block = {"type": "compaction", "content": "Summary: a busy harbour."}
    history = [
        {"role": "user", "content": LONG},
        {"role": "assistant", "content": [block, {"type": "text", "text": "Noted."}]},
        {"role": "user", "content": "And then?"},
    ]
    answer = http.post("/v1/messages", json=messages(messages=history), headers=BETA).json()
    assert answer["usage"]["input_tokens"] < 100
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": seal("A busy harbour.")}
    items = [{"role": "user", "content": LONG}, item, {"role": "user", "content": "And then?"}]
    later = http.post("/v1/responses", json=responses(input=items), headers=OPENAI).json()
    assert later["usage"]["input_tokens"] < 200
    whole = http.post("/v1/responses", json=responses(input=LONG), headers=OPENAI).json()
    assert whole["usage"]["input_tokens"] >= len(LONG) // 4


@pytest.mark.parametrize("endpoint", ["/v1/responses/compact", "/v1/responses/input_tokens"])
def test_the_side_endpoints_refuse_a_model_openai_does_not_have(
    endpoint: str, http: httpx.Client
) -> None:
    body = responses(model="route:harbour")
    assert "'route:harbour' does not exist" in error_of(
        http.post(endpoint, json=body, headers=OPENAI)
    )
