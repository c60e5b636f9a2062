"""A model that takes no system prompt (the catalog says so of o1-mini and o1-preview: OpenAI
answers 400, pydantic/pydantic-ai's test_openai_o1_mini_system_role cassettes) reads the
system text at the start of the first user turn, on every stack, with a warning: capability_check
folds it (metis/stages/policy/system_hoist.py), no codec does."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator

from ..stack_table import DEADLINE, FAMILIES, MODELS, adapter

pytestmark = [pytest.mark.backend_independent, pytest.mark.usefixtures("no_backoff")]


def _request(model: str, *messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=[Message.system("Answer in French."), *messages],
        system_prompt="Be brief.",
        max_output_tokens=64,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["o1-mini", "o1-preview"])
async def test_o1_mini_reads_the_system_prompt_in_the_first_user_message(
    model: str, emulator: Emulator
) -> None:
    a = adapter("openai", emulator)
    request = _request(f"openai:{model}", Message.user("Hi"), Message.assistant("Yes?"))
    with anyio.fail_after(DEADLINE):
        reply = await a.complete(request)  # the emulator refuses a system message, as OpenAI
    sent = emulator.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant"]
    assert sent[0]["content"] == "Be brief.\n\nAnswer in French.\n\nHi"
    assert [(w.block_type, w.message_id) for w in reply.warnings] == [("system prompt", None)]
    await a.aclose()


@pytest.mark.anyio
async def test_a_model_that_takes_a_system_message_keeps_it(emulator: Emulator) -> None:
    a = adapter("openai", emulator)
    for model in ("o1", "gpt-4o-mini", "o3-mini"):
        with anyio.fail_after(DEADLINE):
            reply = await a.complete(_request(f"openai:{model}", Message.user("Hi")))
        sent = emulator.requests[-1].json()["messages"]
        assert sent[0] == {"role": "system", "content": "Be brief.\n\nAnswer in French."}
        assert reply.warnings == []
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stack", list(FAMILIES))
async def test_every_stack_folds_the_system_text_of_a_model_without_one(
    stack: str, emulator: Emulator
) -> None:
    """Declared of any model (a catalog entry's ``system_prompt: false``, or the adapter's
    capabilities): the same fold on every wire."""
    a = adapter(stack, emulator, capabilities={"supports_system_prompt": False})
    with anyio.fail_after(DEADLINE):
        reply = await a.complete(_request(MODELS[stack], Message.user("Hi")))
    sent = json.dumps(emulator.requests[-1].json())
    assert "Be brief.\\n\\nAnswer in French.\\n\\nHi" in sent
    assert sent.count("Be brief.") == 1
    assert [w.block_type for w in reply.warnings] == ["system prompt"]
    await a.aclose()


def test_the_emulator_refuses_o1_minis_system_message_as_openai_does() -> None:
    emulator = Emulator()
    with httpx.Client(
        transport=emulator.transport(),
        base_url="https://api.openai.com",
        headers={"authorization": "Bearer test"},
    ) as http:
        said = [{"role": "user", "content": "Hi"}]
        body = {"model": "o1-mini", "messages": said}
        assert http.post("/v1/chat/completions", json=body).status_code == 200
        system = {**body, "messages": [{"role": "system", "content": "Be brief."}, *said]}
        assert http.post("/v1/chat/completions", json=system).status_code == 400
