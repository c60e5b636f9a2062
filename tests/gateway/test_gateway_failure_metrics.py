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
