"""``GET /metrics`` counts every endpoint of the APIs it serves, each under its own ``endpoint``
label (its method and path), so the model calls' totals and durations are not mixed with the
stored responses read back, the token counts or the model list; driven by the official SDKs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
anthropic = ImportOnUse("anthropic")


@contextmanager
def _clients() -> Iterator[tuple[Any, Any, str]]:
    """The official SDKs' clients of a gateway (emulator-backed), and its metrics' URL."""
    with gateway_url(Emulator()) as url:
        oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=f"{url}/v1", max_retries=0)
        claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        yield oai, claude, f"{url}/metrics"


def _samples(text: str, family: str) -> dict[str, float]:
    """The samples of one metric family: its labels (as written) -> its value."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(f"metis_gateway_{family}{{"):
            labels, _, value = line.rpartition(" ")
            found[labels.removeprefix(f"metis_gateway_{family}")] = float(value)
    return found


def _requests(api: str, endpoint: str, model: str, status: int) -> str:
    return f'{{api="{api}",endpoint="{endpoint}",model="{model}",status="{status}"}}'


@pytest.mark.parametrize("model", ["gpt5", "flash"])  # passed through, translated
def test_every_endpoint_is_counted_under_its_own_label(model: str) -> None:
    with _clients() as (oai, claude, metrics):
        made = oai.responses.create(model=model, input="Hello there")
        oai.responses.retrieve(made.id)
        oai.responses.input_items.list(made.id)
        oai.responses.input_tokens.count(model=model, input="Hello there")
        claude.messages.count_tokens(model="sonnet", messages=[{"role": "user", "content": "Hi"}])
        oai.models.list()
        oai.models.retrieve("sonnet")
        oai.responses.delete(made.id)
        with pytest.raises(openai.NotFoundError):
            oai.responses.retrieve(made.id)
        text = httpx.get(metrics).text
    requests = _samples(text, "requests_total")
    expected = {
        _requests("responses", "POST /v1/responses", model, 200): 1,
        _requests("responses", "GET /v1/responses/{id}", "", 200): 1,
        _requests("responses", "GET /v1/responses/{id}", "", 404): 1,
        _requests("responses", "GET /v1/responses/{id}/input_items", "", 200): 1,
        _requests("responses", "DELETE /v1/responses/{id}", "", 200): 1,
        _requests("responses", "POST /v1/responses/input_tokens", model, 200): 1,
        _requests("anthropic", "POST /v1/messages/count_tokens", "sonnet", 200): 1,
        _requests("chat", "GET /v1/models", "", 200): 1,
        _requests("chat", "GET /v1/models/{id}", "sonnet", 200): 1,
    }
    assert requests == expected
    errors = _samples(text, "errors_total")
    assert errors == {
        '{api="responses",endpoint="GET /v1/responses/{id}",error_class="invalid_request"}': 1
    }
    durations = _samples(text, "request_seconds_count")
    assert durations['{api="responses",endpoint="POST /v1/responses"}'] == 1
    assert durations['{api="responses",endpoint="GET /v1/responses/{id}"}'] == 2


def test_a_refused_count_is_counted_with_its_status_and_class() -> None:
    with _clients() as (oai, claude, metrics):
        with pytest.raises(anthropic.NotFoundError):
            claude.messages.count_tokens(model="nope", messages=[{"role": "user", "content": "Hi"}])
        with pytest.raises(openai.BadRequestError):
            oai.responses.input_tokens.count(
                model="flash", input="Hi", previous_response_id="resp_none"
            )
        text = httpx.get(metrics).text
    requests = _samples(text, "requests_total")
    assert requests == {
        _requests("anthropic", "POST /v1/messages/count_tokens", "", 404): 1,
        _requests("responses", "POST /v1/responses/input_tokens", "flash", 400): 1,
    }  # a name the file has is its label, answered or not; another name is none
    errors = _samples(text, "errors_total")
    assert errors == {
        '{api="anthropic",endpoint="POST /v1/messages/count_tokens",'
        'error_class="invalid_request"}': 1,
        '{api="responses",endpoint="POST /v1/responses/input_tokens",'
        'error_class="invalid_request"}': 1,
    }
