"""Cassettes: the format round-trips, replay checks requests, recording scrubs keys."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from metis.testing.cassette import (
    Cassette,
    CassetteMismatch,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    RecordingTransport,
    ReplayTransport,
)

URL = "https://api.example.com/v1/chat"


def cassette(body: dict[str, object] | None = None) -> Cassette:
    return Cassette(
        name="demo",
        interactions=[
            Interaction(
                request=RecordedRequest(url=URL, headers={"x-api-key": "[REDACTED]"}, body=body),
                response=RecordedResponse(
                    status=200,
                    headers={"content-type": "text/event-stream"},
                    chunks=['data: {"a"', ":1}\n\n"],
                ),
            )
        ],
    )


@pytest.mark.anyio
async def test_replay_serves_the_chunks_with_their_boundaries() -> None:
    client = httpx.AsyncClient(transport=ReplayTransport(cassette()))
    async with client.stream("POST", URL, json={"q": 1}) as response:
        chunks = [c async for c in response.aiter_raw()]
    assert response.status_code == 200
    assert chunks == [b'data: {"a"', b":1}\n\n"]


@pytest.mark.anyio
async def test_replay_refuses_a_body_that_differs_from_the_recording() -> None:
    client = httpx.AsyncClient(transport=ReplayTransport(cassette(body={"q": 1})))
    with pytest.raises(CassetteMismatch, match=r'- "q": 1\n\+ "q": 2'):
        await client.post(URL, json={"q": 2})


@pytest.mark.anyio
async def test_replay_refuses_a_request_beyond_the_recording() -> None:
    transport = ReplayTransport(cassette())
    client = httpx.AsyncClient(transport=transport)
    await client.post(URL, json={})
    assert transport.remaining == 0
    with pytest.raises(CassetteMismatch, match=r"request 2 .* was not recorded"):
        await client.post(URL, json={})


@pytest.mark.anyio
async def test_replay_refuses_another_url() -> None:
    client = httpx.AsyncClient(transport=ReplayTransport(cassette()))
    with pytest.raises(CassetteMismatch, match=r"recorded POST"):
        await client.post("https://elsewhere.example.com/", json={})


@pytest.mark.anyio
async def test_recording_scrubs_keys_and_keeps_chunks(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: 1\n\n"
        )

    recorder = RecordingTransport(httpx.MockTransport(handler), name="rec")
    client = httpx.AsyncClient(transport=recorder)
    response = await client.post(
        URL, json={"q": 1}, headers={"authorization": "Bearer sk-abcdef0123456789"}
    )
    await response.aread()
    recorded = recorder.cassette()
    path = tmp_path / "rec.yaml"
    recorded.dump(path)
    text = path.read_text()
    assert "sk-abcdef" not in text
    loaded = Cassette.load(path)
    assert loaded.interactions[0].request.headers["authorization"] == "[REDACTED]"
    assert loaded.interactions[0].request.body == {"q": 1}
    assert loaded.interactions[0].response.body_chunks() == [b"data: 1\n\n"]
    # and what was recorded replays
    replay = httpx.AsyncClient(transport=ReplayTransport(loaded))
    again = await replay.post(URL, json={"q": 1})
    assert again.content == b"data: 1\n\n"


def test_a_response_needs_exactly_one_body_form() -> None:
    with pytest.raises(ValueError, match=r"exactly one"):
        RecordedResponse(status=200)
