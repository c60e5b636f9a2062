"""Where a base URL the user gives, as the provider documents it for OpenAI's SDK, sends.

OpenAI's SDKs append ``/chat/completions`` to a base URL that ends at the API's root, wherever
the version sits in it; metis's stack paths start at ``/v1``. A bare host still gets the whole
path, and the Anthropic SDK's convention (a base URL before the version) is left as it was.
"""

from __future__ import annotations

import httpx
import pytest
import respx

from metis import AdapterConfig, build_adapter
from metis.adapter.embedder import build_embedder
from metis.cli.stack import endpoint_text
from metis.model import CanonicalRequest, Message
from metis.stacks.loader import load_stack

CHAT = [
    ("https://generativelanguage.googleapis.com/v1beta/openai", "/v1beta/openai/chat/completions"),
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "/v1beta/openai/chat/completions"),
    ("https://api.groq.com/openai/v1", "/openai/v1/chat/completions"),
    ("https://api.groq.com/openai", "/openai/v1/chat/completions"),
    ("https://openrouter.ai/api/v1", "/api/v1/chat/completions"),
    ("https://res.openai.azure.com/openai/v1/", "/openai/v1/chat/completions"),
    ("https://api.deepinfra.com/v1/openai", "/v1/openai/chat/completions"),
    ("https://api.z.ai/api/paas/v4", "/api/paas/v4/chat/completions"),
    ("https://gw.example.com/v1/acct/gw/openai", "/v1/acct/gw/openai/chat/completions"),
    ("http://localhost:8000", "/v1/chat/completions"),
    ("http://localhost:8000/v1", "/v1/chat/completions"),
]


def _host_and_path(base_url: str, path: str) -> str:
    return base_url.split("//")[1].split("/")[0] + path


@pytest.mark.parametrize(("base_url", "path"), CHAT)
def test_an_openai_compatible_base_url_joins_the_path_as_the_sdk_does(
    base_url: str, path: str
) -> None:
    adapter = build_adapter("openai_compatible", AdapterConfig(base_url=base_url))
    url = adapter.endpoint.url(stream=True, model="m")
    assert url.split("//")[1] == _host_and_path(base_url, path)


def test_a_query_on_a_versioned_base_url_stays_after_the_path() -> None:
    config = AdapterConfig(base_url="https://proxy.example.com/v1beta/openai?key=abc")
    url = build_adapter("openai_compatible", config).endpoint.url(stream=False, model="m")
    assert url == "https://proxy.example.com/v1beta/openai/chat/completions?key=abc"
    config = AdapterConfig(base_url="https://proxy.example.com/v1?key=abc")
    url = build_adapter("openai_compatible", config).endpoint.url(stream=False, model="m")
    assert url == "https://proxy.example.com/v1/chat/completions?key=abc"


def test_openais_variable_and_the_responses_stack_take_a_versioned_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.example.com/v1/acct/gw/openai")
    chat = build_adapter("openai", AdapterConfig(api_key="k")).endpoint
    responses = build_adapter("openai_responses", AdapterConfig(api_key="k")).endpoint
    assert chat.url(stream=True, model="m").endswith("/gw/openai/chat/completions")
    assert responses.url(stream=True, model="m").endswith("/gw/openai/responses")
    assert "/gw/openai/chat/completions;" in endpoint_text(load_stack("openai"))


def test_an_anthropic_base_url_keeps_the_sdks_convention() -> None:
    """The Anthropic SDK's base URL ends before ``/v1``, whatever version its own path names."""
    config = AdapterConfig(api_key="k", base_url="https://gw.example.com/v1/acct/gw/anthropic")
    url = build_adapter("anthropic", config).endpoint.url(stream=True, model="m")
    assert url == "https://gw.example.com/v1/acct/gw/anthropic/v1/messages"


def test_an_openai_compatible_embedder_takes_geminis_base_url() -> None:
    base_url = "https://generativelanguage.googleapis.com/v1beta/openai/"
    embedder = build_embedder("openai_compatible", AdapterConfig(base_url=base_url))
    url = embedder.endpoint.url(stream=False, model="m")
    assert url == "https://generativelanguage.googleapis.com/v1beta/openai/embeddings"


@pytest.mark.anyio
@respx.mock
async def test_a_call_with_geminis_documented_base_url_reaches_its_endpoint() -> None:
    url = "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
    reply = {
        "id": "c",
        "model": "gemini-2.5-flash",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    route = respx.post(url).mock(return_value=httpx.Response(200, json=reply))
    config = AdapterConfig(
        api_key="k", base_url="https://generativelanguage.googleapis.com/v1beta/openai/"
    )
    request = CanonicalRequest(
        model="gemini-2.5-flash", messages=[Message.user("hi")], max_output_tokens=10, stream=False
    )
    async with build_adapter("openai_compatible", config) as adapter:
        response = await adapter.complete(request)
    assert route.called
    assert response.text == "ok"
