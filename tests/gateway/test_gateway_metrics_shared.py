"""One ``/metrics`` for the workers of one server: each writes its counts beside the others',
and a scrape of any answers the sum."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.metrics import Metrics
from metis.gateway.metrics_shared import absorb, snapshot
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}
LINE = (
    'metis_gateway_requests_total{api="anthropic",'
    'endpoint="POST /v1/messages",model="flash",status="200"}'
)


async def test_a_scrape_of_either_worker_counts_both(tmp_path: Path) -> None:
    emulator = Emulator()
    workers = [create_app(gateway_config(emulator), str(tmp_path)) for _ in range(2)]
    clients = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
        for app in workers
    ]
    headers = {"x-api-key": GATEWAY_KEY}
    for client, times in zip(clients, (1, 2), strict=True):
        for _ in range(times):
            answer = await client.post("/v1/messages", json=SAID, headers=headers)
            assert answer.status_code == 200
    await clients[1].get("/metrics")  # the second worker's counts written
    text = (await clients[0].get("/metrics")).text
    assert f"{LINE} 3" in text
    assert (
        'metis_gateway_request_seconds_count{api="anthropic",endpoint="POST /v1/messages"} 3'
    ) in text
    assert 'metis_gateway_cost_usd_total{model="gemini:gemini-2.5-flash"}' in text
    for client in clients:
        await client.aclose()


async def test_a_worker_writes_its_counts_as_it_stops(tmp_path: Path) -> None:
    app = create_app(gateway_config(Emulator()), str(tmp_path))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            said = await client.post("/v1/messages", json=SAID, headers={"x-api-key": GATEWAY_KEY})
            assert said.status_code == 200
    written = _files(tmp_path)
    assert len(written) == 1 and '"flash", 200, 1]' in written[0]


def _files(directory: Path) -> list[str]:
    return [path.read_text() for path in directory.glob("*.json")]


def test_a_routes_failed_attempts_are_summed_over_the_workers() -> None:
    workers = [Metrics(), Metrics()]
    for worker, times in zip(workers, (1, 2), strict=True):
        for _ in range(times):
            worker.failed_attempt("openai:gpt-4o", "overloaded")
    total = Metrics()
    for worker in workers:
        absorb(total, json.loads(json.dumps(snapshot(worker))))
    line = 'metis_gateway_failed_attempts_total{model="openai:gpt-4o",error_class="overloaded"} 3'
    assert line in total.render()


def test_request_durations_are_kept_in_their_own_bucket_and_rendered_cumulative() -> None:
    """Each request is counted once, in the first bucket it took no longer than (not once in
    every bucket above it: a loop over the buckets at every request's end); the histogram's
    cumulative counts are summed as it is rendered, the workers' added bucket by bucket."""
    first, second = Metrics(), Metrics()
    for seconds in (0.01, 0.05, 0.07, 0.3, 400.0):
        first.request("anthropic", "m", 200, seconds)
    second.request("anthropic", "m", 200, 2.0)
    assert first.durations[("anthropic", "POST /v1/messages")] == [2, 1, 0, 1] + [0] * 8
    both = Metrics()
    for worker in (first, second):
        absorb(both, json.loads(json.dumps(snapshot(worker))))
    buckets = {
        line.split('le="')[1].split('"')[0]: int(line.rsplit(" ", 1)[1])
        for line in both.render().splitlines()
        if line.startswith("metis_gateway_request_seconds_bucket")
    }
    assert buckets == {
        "0.05": 2, "0.1": 3, "0.25": 3, "0.5": 4, "1": 4, "2.5": 5, "5": 5, "10": 5, "30": 5,
        "60": 5, "120": 5, "300": 5, "+Inf": 6,
    }  # fmt: skip
