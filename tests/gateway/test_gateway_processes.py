"""Two ``metis serve`` processes over one redis-server, an emulator upstream: one key's rate
and one budget are enforced across both, a Responses conversation started on one goes on
on the other, and so does a Messages client's tool loop on Gemini 3 with its calls' thought
signatures (slow: it starts two servers)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from metis.gateway.keys import digest
from metis.testing.emulator import Emulator

from ..redis_servers import RedisFactory, free_port

pytestmark = pytest.mark.slow
SAID = {"model": "flash", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture
def redis_url() -> Iterator[str]:
    pytest.importorskip("coredis")
    factory = RedisFactory()
    try:
        yield f"redis://127.0.0.1:{factory.server().port}"
    finally:
        factory.close()


def _config(tmp_path: Path, upstream: str, redis_url: str) -> Path:
    keys = [
        {"name": "shared", "sha256": digest("shared-key"), "requests_per_minute": 3},
        {"name": "paid", "sha256": digest("paid-key"), "budget_usd": "0.000001"},
        {"name": "any", "sha256": digest("any-key")},
    ]
    data = {
        "adapters": {"gemini": {"type": "gemini", "base_url": upstream, "api_key_env": "UP_KEY"}},
        "models": {
            "gemini:gemini-2.5-flash": {"adapter": "gemini", "aliases": ["flash"]},
            "gemini:gemini-3-pro-preview": {"adapter": "gemini", "aliases": ["g3"]},
        },
        "gateway": {"keys": keys, "redis_url": redis_url},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _started(config: Path, *more: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "metis.cli", "serve", "--config", str(config)]
    process = subprocess.Popen(
        [*command, "--port", str(port), *more],
        env={"UP_KEY": "sk-upstream", "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{port}"


def _ready(process: subprocess.Popen[bytes], url: str) -> None:
    for _ in range(1200):  # a bound on a server that never starts, not a timing
        assert process.poll() is None, "the gateway exited"
        try:
            if httpx.get(url + "/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the gateway did not become ready")


def test_two_gateway_processes_share_one_rate_one_budget_and_the_responses(
    tmp_path: Path, redis_url: str
) -> None:
    with Emulator().start() as upstream:
        config = _config(tmp_path, upstream.base_url("gemini"), redis_url)
        servers = [_started(config), _started(config)]
        try:
            for process, url in servers:
                _ready(process, url)
            (_, one), (_, two) = servers

            def ask(url: str, key: str, path: str = "/v1/messages", **body: Any) -> Any:
                said = {**SAID, **body}
                return httpx.post(url + path, json=said, headers={"x-api-key": key}, timeout=60)

            statuses = [ask(url, "shared-key").status_code for url in (one, two, one, two)]
            assert statuses == [200, 200, 200, 429]
            assert ask(one, "paid-key").status_code == 200  # its reply costs more than the budget
            assert ask(two, "paid-key").status_code == 429
            started = ask(one, "any-key", "/v1/responses", input="Hi").json()
            more = {"input": "And?", "previous_response_id": started["id"]}
            assert ask(two, "any-key", "/v1/responses", **more).status_code == 200
            _signed_across(upstream, lambda url, **body: ask(url, "any-key", **body), one, two)
        finally:
            for process, _ in servers:
                process.terminate()
                process.wait(timeout=60)


def _signed_across(upstream: Emulator, ask: Any, one: str, two: str) -> None:
    """A call Gemini 3 made through ``one`` goes back through ``two`` with its signature."""
    weather = {"name": "get_weather", "input_schema": {"type": "object"}}
    asked = [{"role": "user", "content": "Weather in Oslo?"}]
    first = ask(one, model="g3", messages=asked, tools=[weather]).json()
    call = next(block for block in first["content"] if block["type"] == "tool_use")
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "cold"}
    turns = [*asked, {"role": "assistant", "content": first["content"]}]
    answer = ask(two, model="g3", messages=[*turns, {"role": "user", "content": [result]}])
    assert answer.status_code == 200, answer.text
    contents = upstream.bodies("gemini")[-1]["contents"]
    part = next(p for c in contents for p in c["parts"] if "functionCall" in p)
    assert part.get("thoughtSignature") not in (None, "skip_thought_signature_validator")


def test_the_metrics_of_two_workers_are_one(tmp_path: Path, redis_url: str) -> None:
    with Emulator().start() as upstream:
        config = _config(tmp_path, upstream.base_url("gemini"), redis_url)
        process, url = _started(config, "--workers", "2")
        try:
            _ready(process, url)
            for _ in range(6):
                said = httpx.post(url + "/v1/messages", json=SAID, headers={"x-api-key": "any-key"})
                assert said.status_code == 200
            line = (
                'metis_gateway_requests_total{api="anthropic",'
                'endpoint="POST /v1/messages",model="flash",status="200"} 6'
            )
            scraped = []
            for _ in range(100):  # each worker writes its counts every second: a bound
                scraped.append(line in httpx.get(url + "/metrics").text)
                if scraped[-1]:
                    break
                time.sleep(0.1)
            assert scraped[-1]
        finally:
            process.terminate()
            process.wait(timeout=60)
