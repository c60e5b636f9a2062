"""A session's ``adapters`` keyed by model as well as by stack: two Ollama servers (or two
models with settings of their own) in one session, each model's calls through its own
adapter; an adapter given for the stack whose settings name another model is refused before
anything is sent, not used with that model's capabilities."""

from __future__ import annotations

from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import ConfigError
from metis.sessions import Session
from metis.testing.emulator import Emulator

pytestmark = pytest.mark.anyio


def _ollama(emulator: Emulator, host: str, **settings: Any) -> Any:
    config = AdapterConfig(
        base_url=emulator.url, extra_headers={"x-host": host}, settings=settings or None
    )
    return build_adapter("ollama", config)


async def test_each_models_calls_go_through_the_adapter_given_for_it(emulator: Emulator) -> None:
    local = _ollama(emulator, "local", model="qwen3")
    remote = _ollama(emulator, "remote", model="llama3.2", keep_alive="1h")
    adapters = {"ollama:qwen3": local, "ollama:llama3.2": remote}
    async with local, remote:
        session = Session("ollama:qwen3", adapters=adapters)
        await session.asend("Hello there")
        session.model = "ollama:llama3.2"
        await session.asend("And you?")
        session.model = "ollama:qwen3"
        await session.asend("Once more")
    sent = [r for r in emulator.requests if r.path == "/api/chat"]
    assert [r.headers.get("x-host") for r in sent] == ["local", "remote", "local"]
    assert [r.body.count(b'"keep_alive"') for r in sent] == [0, 1, 0]


async def test_a_stacks_adapter_for_another_model_is_refused_before_sending(
    emulator: Emulator,
) -> None:
    qwen = _ollama(emulator, "local", model="qwen3")
    session = Session("ollama:llava", adapters={"ollama": qwen})
    with pytest.raises(ConfigError) as caught:
        await session.asend("What is in this picture?")
    assert "adapters['ollama'] is for model 'qwen3'" in str(caught.value)
    assert "adapters['ollama:llava']" in str(caught.value)
    assert emulator.requests == [] and session.messages == []
    session.model = "ollama:qwen3:latest"  # the same model, as Ollama names it in full
    await session.asend("Hello")
    await qwen.aclose()


@pytest.mark.parametrize(
    ("adapters", "said"),
    [({"ollama:": None}, "expected a model as 'provider:model'"), ({5: None}, "keyed by stack")],
)
def test_a_key_that_is_no_stack_or_model_name_is_refused(adapters: Any, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        Session("ollama:qwen3", adapters=adapters)
