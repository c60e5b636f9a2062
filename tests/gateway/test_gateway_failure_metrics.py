"""What an operator's dashboard reads of failures: a request naming a model or route of the
file that fails upstream is counted in ``metis_gateway_requests_total`` under that name with
its status (it was counted with no model, so a route's or a model's failure rate could not be
read by name); a name the file does not have is still never a label."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")
SAID: Any = [{"role": "user", "content": "Hi"}]


def _requests(api: str, model: str, status: int) -> str:
    endpoint = "POST /v1/messages" if api == "anthropic" else "POST /v1/chat/completions"
    return (
        f'metis_gateway_requests_total{{api="{api}",endpoint="{endpoint}",'
        f'model="{model}",status="{status}"}} 1'
    )


def test_a_failed_route_and_model_are_counted_under_their_names(
    url: str, emulator: Emulator, claude: Any, oai: Any
) -> None:
    emulator.push_fault("overloaded", provider="gemini")
    emulator.push_fault("overloaded", provider="openai")
    with pytest.raises(openai.InternalServerError) as failed:
        oai.chat.completions.create(model="fallback", messages=SAID)
    assert failed.value.status_code == 503
    assert "every model of route fallback failed" in str(failed.value)
    emulator.push_fault("rate_limit=2", provider="anthropic")
    with pytest.raises(anthropic.RateLimitError):
        claude.messages.create(model="sonnet", max_tokens=20, messages=SAID)
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="no-such-model", max_tokens=20, messages=SAID)
    text = httpx.get(url + "/metrics").text
    assert _requests("chat", "fallback", 503) in text
    assert _requests("anthropic", "sonnet", 429) in text
    assert _requests("anthropic", "", 404) in text
    assert "no-such-model" not in text


@pytest.mark.parametrize("streamed", [False, True])
def test_a_route_moves_on_from_a_model_past_its_own_deadline(streamed: bool) -> None:
    """A model that sends nothing (it stalls before its first byte) is given up at its
    adapter's ``timeout_seconds``, within the gateway's longer ``request_timeout_seconds``:
    the route answers from the next model, and the stalled one is counted ``network``."""
    from metis.gateway.app import create_app
    from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

    emulator = Emulator()
    gemini = {"type": "gemini", "api_key_env": "UPSTREAM_KEY", "max_retries": 0}
    adapters = {"gemini": {**gemini, "timeout_seconds": 1}}
    config = gateway_config(emulator, {"request_timeout_seconds": 60}, adapters=adapters)
    with serving(create_app(config)) as (url, _):
        oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
        emulator.push_fault("stall=30;after=0", provider="gemini")
        if streamed:
            chunks = oai.chat.completions.create(model="fallback", messages=SAID, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            reply = oai.chat.completions.create(model="fallback", messages=SAID)
            text = reply.choices[0].message.content
        metrics = httpx.get(url + "/metrics").text
    assert text == "You said: Hi"
    assert [r.provider for r in emulator.requests] == ["gemini", "openai"]
    failed = 'failed_attempts_total{model="gemini:gemini-2.5-flash",error_class="network"} 1'
    assert failed in metrics
    assert _requests("chat", "fallback", 200) in metrics
