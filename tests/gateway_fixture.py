"""A gateway over emulator-backed models of every family, and a real uvicorn server for it on
loopback (tests/test_gateway_*.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette

from metis.cli.serve import http_protocol
from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.testing.emulator import Emulator

GATEWAY_KEY = "gw-secret-key"
WEATHER_FUNCTION: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
"""The tests' one tool, as a function: a Responses tool is ``{"type": "function", **it}``, a
Chat tool ``{"type": "function", "function": it}``, an Anthropic tool its name, description
and ``parameters`` as ``input_schema``."""
WEATHER_MESSAGES_TOOL: dict[str, Any] = {
    "name": WEATHER_FUNCTION["name"],
    "description": WEATHER_FUNCTION["description"],
    "input_schema": WEATHER_FUNCTION["parameters"],
}
FAMILIES = {
    # adapter entry -> (stack, model id, alias)
    "anthropic": ("anthropic", "anthropic:claude-sonnet-4-5", "sonnet"),
    "openai": ("openai", "openai:gpt-4o", "gpt"),
    "responses": ("openai_responses", "openai_responses:gpt-5", "gpt5"),
    "gemini": ("gemini", "gemini:gemini-2.5-flash", "flash"),
    "bedrock": ("bedrock", "bedrock:anthropic.claude-haiku-4-5-20251001-v1:0", "haiku"),
    "groq": ("groq", "groq:llama-3.3-70b-versatile", "llama"),
}


def gateway_config(
    emulator: Emulator,
    gateway: dict[str, Any] | None = None,
    tracer_provider: Any = None,
    models: dict[str, Any] | None = None,
    adapters: dict[str, Any] | None = None,
    **more: Any,
) -> GatewayConfig:
    """``models`` and ``adapters``: entries beside the families' own (an embedding model, an
    adapter of another stack), each adapter served by the emulator too."""
    families: dict[str, Any] = {
        name: {"type": stack, "api_key_env": "UPSTREAM_KEY", "max_retries": 0}
        for name, (stack, _, _) in FAMILIES.items()
    }
    adapters = {**families, **(adapters or {})}
    adapters["bedrock"]["settings"] = {"region": "us-east-1"}
    own = {
        model: {"adapter": name, "aliases": [alias]} for name, (_, model, alias) in FAMILIES.items()
    }
    data = {
        "adapters": adapters,
        "models": {**own, **(models or {})},
        "routes": {"fallback": {"models": ["flash", "gpt"]}},
        "gateway": {"api_key_env": "GATEWAY_KEY", **(gateway or {})},
        **more,
    }
    environ = {"UPSTREAM_KEY": "sk-upstream", "GATEWAY_KEY": GATEWAY_KEY}
    clients = {name: emulator.client() for name in adapters}
    return GatewayConfig.from_dict(
        data, environ=environ, clients=clients, tracer_provider=tracer_provider
    )


@contextmanager
def serving(app: Starlette, **options: Any) -> Iterator[tuple[str, uvicorn.Server]]:
    """``app`` under uvicorn on a free loopback port, in a thread; its base URL. ``options``:
    more of uvicorn's settings (``timeout_keep_alive``)."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan="on",
        http=http_protocol(),
        **options,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the gateway did not start")
            threading.Event().wait(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join()


@contextmanager
def gateway_url(emulator: Emulator, **gateway: Any) -> Iterator[str]:
    with serving(create_app(gateway_config(emulator, gateway))) as (url, _):
        yield url


def scope(path: str = "/v1/messages") -> dict[str, Any]:
    """The ASGI scope of a POST to ``path`` with the gateway key, for calling the app
    directly (a client that hangs up, a body that never ends)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"x-api-key", GATEWAY_KEY.encode()), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("gw", 80),
        "scheme": "http",
        "root_path": "",
    }
