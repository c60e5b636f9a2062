"""Lone UTF-16 surrogates (a JSON ``"\\ud83d"`` escape alone, which Python's json reads into a
``str`` no UTF-8 can hold) on either side of the gateway.

A client's request (Anthropic Messages, Chat Completions, Responses) with one in any string
or key is answered with a classified 400 in the caller's API's shape. A provider's reply with
one anywhere (every recorded reply of tests/conformance/surrogate_sweep.py, served as the
upstream of each family) is written back to every API's caller, passed through or translated,
as UTF-8 JSON or SSE whose every payload parses; an error is in the API's shape and never the
gateway's own "internal gateway error"; a Responses reply kept for ``previous_response_id``
is served again as UTF-8 JSON too. The default run takes a seeded few of each group of
replies; the slow run every kind of spot of each API.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import defaultdict
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.item_ids import made_id
from metis.gateway.json_text import JSONAnswer, utf8
from metis.gateway.relay import AnthropicRelay
from metis.gateway.sse import data, event, object_head, quoted
from metis.model import ProviderRaw
from metis.testing.emulator import Emulator
from tests.conformance import surrogate_sweep as sweep
from tests.gateway.test_gateway_fuzz import SEEDS, error_shape
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
HEADERS = {"x-api-key": GATEWAY_KEY, "content-type": "application/json"}
ALIASES = {
    "anthropic": "sonnet",
    "openai": "gpt",
    "openai_responses": "gpt5",
    "gemini": "flash",
    "bedrock": "haiku",
}
"""The gateway's model of each recorded API's family (tests/gateway_fixture.py)."""
PER_GROUP = int(os.environ.get("METIS_GATEWAY_SURROGATE_CASES", "12"))
HIGH = chr(0xD83D)


# The gateway's own writing --------------------------------------------------------------------


def test_what_the_gateway_writes_keeps_a_lone_surrogate_as_its_escape() -> None:
    said = {"text": "a" + HIGH + "é"}
    written = [event("e", said), data(said), quoted(said["text"]), object_head(said) + b"}"]
    assert [w.decode() for w in written] == [
        'event: e\ndata: {"text":"a\\ud83dé"}\n\n',
        'data: {"text":"a\\ud83dé"}\n\n',
        '"a\\ud83dé"',
        '{"text":"a\\ud83dé",}',
    ]
    assert JSONAnswer(said).body == utf8(json.dumps(said, ensure_ascii=False)).replace(b" ", b"")
    assert json.loads(JSONAnswer(said).body) == said  # the escape reads back as it came


def test_a_relayed_reply_and_an_item_id_made_from_a_providers_id_take_a_lone_surrogate() -> None:
    relay = AnthropicRelay("sonnet", ProviderRaw(provider="anthropic", model="anthropic:x"))
    body = b'{"id":"msg_1","type":"message","content":[{"type":"text","text":"\\ud83d"}]}'
    assert json.loads(relay.whole(body))["content"][0]["text"] == HIGH
    assert made_id("message", "resp_" + HIGH, "0") != made_id("message", "resp_", "0")


# A client's request ---------------------------------------------------------------------------


def request_cases() -> list[tuple[str, bytes]]:
    """Each API's full request (tests/gateway/test_gateway_fuzz.py) with one string, or one
    key, a lone surrogate."""
    cases = []
    for api, (_, seed) in sorted(SEEDS.items()):
        parts = [sweep.Piece(b"", {**seed, "model": "gpt"})]
        for spot in sweep.spots(parts):
            if spot.path != ("model",):
                cases.append((api, sweep.mutated(parts, spot, HIGH)))
    return cases


def test_a_request_with_a_lone_surrogate_anywhere_is_a_classified_400() -> None:
    app = create_app(gateway_config(Emulator()))

    async def run() -> list[str]:
        wrong = []
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
            for api, raw in request_cases():
                reply = await gw.post(PATHS[api], content=raw, headers=HEADERS)
                if reply.status_code != 400 or not error_shape(api, reply):
                    wrong.append(f"{api} {raw[:200]!r}: {reply.status_code} {reply.text[:200]}")
        return wrong

    wrong = anyio.run(run)
    assert not wrong, "\n".join(wrong[:10])


# A provider's reply ---------------------------------------------------------------------------


class Upstream:
    """Every family's provider: whatever reply is set, to every request."""

    def __init__(self) -> None:
        self.status, self.content_type, self.body = 200, "application/json", b""

    def client(self) -> httpx.AsyncClient:
        def answer(request: httpx.Request) -> httpx.Response:
            headers = {"content-type": self.content_type}
            return httpx.Response(self.status, headers=headers, content=self.body)

        return httpx.AsyncClient(transport=httpx.MockTransport(answer))


def asked(api: str, model: str, stream: bool) -> dict[str, Any]:
    hi = [{"role": "user", "content": "hi"}]
    if api == "anthropic":
        return {"model": model, "max_tokens": 100, "stream": stream, "messages": hi}
    if api == "chat":
        return {"model": model, "stream": stream, "messages": hi}
    return {"model": model, "stream": stream, "input": "hi"}


def written_wrong(status: int, content_type: str, raw: bytes) -> str | None:
    """What is wrong with an answer the gateway wrote (None: nothing)."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        return f"not UTF-8: {exc}"
    if status >= 500 and ("internal gateway error" in text or '"error"' not in text):
        return f"{status}: {text[:300]}"
    payloads = (
        [line[5:] for line in text.splitlines() if line.startswith("data:")]
        if "event-stream" in content_type
        else [text]
    )
    for payload in payloads:
        if payload.strip() != "[DONE]":
            try:
                json.loads(payload)
            except ValueError:
                return f"not JSON: {payload[:300]!r}"
    return None


_RESPONSE_ID = re.compile(rb'"id":"(resp_[^"]+)"')


async def answer_wrong(gw: httpx.AsyncClient, api: str, case: sweep.Case) -> str | None:
    body = asked(api, ALIASES[case.source.api], case.source.streamed)
    async with gw.stream("POST", PATHS[api], json=body, headers=HEADERS) as reply:
        raw = await reply.aread()
    wrong = written_wrong(reply.status_code, reply.headers.get("content-type", ""), raw)
    kept = _RESPONSE_ID.search(raw) if api == "responses" and wrong is None else None
    if kept is not None:
        again = await gw.get(f"/v1/responses/{kept[1].decode()}", headers=HEADERS)
        wrong = written_wrong(again.status_code, again.headers["content-type"], again.content)
    return wrong


def reply_faults(cases: list[sweep.Case]) -> list[str]:
    upstream = Upstream()
    app = create_app(gateway_config(upstream))  # type: ignore[arg-type]

    async def run() -> list[str]:
        found = []
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as gw:
            for case in cases:
                upstream.body = sweep.mutated(case.parts, case.spot, case.lone, case.after)
                upstream.status = case.source.status
                upstream.content_type = case.source.content_type
                for api in PATHS:
                    with anyio.fail_after(30):
                        wrong = await answer_wrong(gw, api, case)
                    if wrong is not None:
                        found.append(f"{api} {case}:\n    {wrong}")
        return found

    return anyio.run(run)


def reply_cases() -> list[sweep.Case]:
    sources = [s for s in sweep.recorded() if s.api in ALIASES]
    return sweep.cases(sources, every_source=False)


def test_a_providers_reply_with_a_lone_surrogate_anywhere_is_written_as_utf8() -> None:
    groups = defaultdict(list)
    for case in reply_cases():
        groups[case.source.api, case.source.streamed, case.source.status].append(case)
    rng = random.Random(5)
    chosen = [
        case
        for _, group in sorted(groups.items())
        for case in (group if len(group) <= PER_GROUP else rng.sample(group, PER_GROUP))
    ]
    found = reply_faults(chosen)
    assert not found, "\n".join(found[:10])


@pytest.mark.slow
def test_every_kind_of_reply_with_a_lone_surrogate_is_written_as_utf8(
    request: pytest.FixtureRequest,
) -> None:
    if "slow" not in (request.config.option.markexpr or "") and not os.environ.get("METIS_SLOW"):
        pytest.skip("the full sweep: select it with -m slow")
    found = reply_faults(reply_cases())
    assert not found, "\n".join(found[:10])
