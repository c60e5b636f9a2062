"""Adaptive thinking asks for its text: ``thinking.display: "summarized"``. From Claude Opus
4.7 on (and the Claude 5 models) the Messages API leaves a thinking block's text out unless the
request says so (``display`` defaults to ``"omitted"``: the block holds its signature only), so
a reasoning request without it reads back no reasoning. Sources: platform.claude.com's
adaptive-thinking and Opus 5.5 pages ("with the default display setting the text in these
blocks is empty"); anthropics/claude-agent-sdk-python#831 (Opus 4.7 returns empty thinking text
unless display is forwarded); docker/docker-agent#3415 (sends "summarized" with adaptive
thinking for that reason)."""

from __future__ import annotations

from typing import Any

import pytest

from metis import AdapterConfig, build_adapter
from metis.model import CanonicalRequest, Message
from metis.testing.emulator import Emulator

from ..helpers import answer

pytestmark = pytest.mark.backend_independent


def _ask(model: str, thinking: str) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"anthropic:{model}",
        messages=[Message.user("Plan a trip")],
        max_output_tokens=20000,
        thinking=thinking,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", ["claude-opus-4-7", "claude-sonnet-4-6"])
async def test_adaptive_thinking_asks_for_summarized_text_and_reads_it(
    emulator: Emulator, stream: bool, model: str
) -> None:
    config = AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"), max_retries=0)
    reply = await answer(build_adapter("anthropic", config), _ask(model, "high"), stream)
    (body,) = [r.json() for r in emulator.requests]
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert reply.thinking  # the reasoning's text, not a signature alone


@pytest.mark.anyio
async def test_thinking_switched_off_or_by_budget_sends_no_display(emulator: Emulator) -> None:
    config = AdapterConfig(api_key="k", base_url=emulator.base_url("anthropic"), max_retries=0)
    adapter = build_adapter("anthropic", config)
    await answer(adapter, _ask("claude-sonnet-4-5", "high"), False)
    await answer(adapter, _ask("claude-sonnet-4-5", "none"), False)
    sent: list[dict[str, Any]] = [r.json()["thinking"] for r in emulator.requests]
    assert sent == [{"type": "enabled", "budget_tokens": 16384}, {"type": "disabled"}]


def _post(emulator: Emulator, thinking: dict[str, Any], model: str = "claude-opus-4-7") -> Any:
    import httpx

    body = {
        "model": model,
        "max_tokens": 2000,
        "thinking": thinking,
        "messages": [{"role": "user", "content": "Plan a trip"}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    return httpx.post(f"{emulator.base_url('anthropic')}/v1/messages", json=body, headers=headers)


def test_the_emulator_omits_the_text_by_default_from_opus_4_7_on(emulator: Emulator) -> None:
    omitted = _post(emulator, {"type": "adaptive"}).json()["content"][0]
    assert omitted["type"] == "thinking" and omitted["thinking"] == ""
    assert omitted["signature"]
    shown = _post(emulator, {"type": "adaptive", "display": "summarized"}).json()["content"][0]
    assert shown["thinking"]
    older = _post(emulator, {"type": "adaptive"}, "claude-sonnet-4-6").json()["content"][0]
    assert older["thinking"]


def test_the_emulator_refuses_a_display_the_api_has_not(emulator: Emulator) -> None:
    refused = _post(emulator, {"type": "adaptive", "display": "full"})
    assert refused.status_code == 400
    assert "thinking.display" in refused.json()["error"]["message"]


def test_the_emulator_refuses_thinking_switched_off_on_a_model_that_always_thinks(
    emulator: Emulator,
) -> None:
    """Claude Fable, Mythos and Opus from 5.5 think always: ``disabled`` is a 400 in the words
    Anthropic's Opus 5.5 page quotes."""
    refused = _post(emulator, {"type": "disabled"}, "claude-fable-5")
    assert refused.status_code == 400
    assert "thinking.type.disabled" in refused.json()["error"]["message"]
    assert _post(emulator, {"type": "disabled"}, "claude-opus-5").status_code == 200


def _on_platform(emulator: Emulator, platform: str, model: str, thinking: dict[str, Any]) -> str:
    """The text of the first reasoning block Bedrock (InvokeModel, Converse) or Vertex gives."""
    import httpx

    body: dict[str, Any] = {"max_tokens": 2000, "thinking": thinking}
    body["messages"] = [{"role": "user", "content": "Plan a trip"}]
    bedrock = f"{emulator.base_url('bedrock')}/model/global.anthropic.{model}"
    auth = {"authorization": "Bearer k"}
    if platform == "vertex":
        url = f"{emulator.base_url('vertex_anthropic')}/v1/projects/p/locations/global"
        url += f"/publishers/anthropic/models/{model}:rawPredict"
        body["anthropic_version"] = "vertex-2023-10-16"
        answer = httpx.post(url, json=body, headers={"authorization": "Bearer ya29.t"}).json()
        return str(answer["content"][0]["thinking"])
    if platform == "invoke":
        body["anthropic_version"] = "bedrock-2023-05-31"
        answer = httpx.post(f"{bedrock}/invoke", json=body, headers=auth).json()
        return str(answer["content"][0]["thinking"])
    converse = {
        "messages": [{"role": "user", "content": [{"text": "Plan a trip"}]}],
        "additionalModelRequestFields": {"thinking": thinking},
    }
    answer = httpx.post(f"{bedrock}/converse", json=converse, headers=auth).json()
    return str(
        answer["output"]["message"]["content"][0]["reasoningContent"]["reasoningText"]["text"]
    )


@pytest.mark.parametrize("platform", ["vertex", "invoke", "converse"])
def test_bedrock_and_vertex_omit_the_text_by_default_as_their_platforms_do(platform: str) -> None:
    """On Vertex and Bedrock too, Claude Opus 4.7 on leaves its thinking's text out unless the
    request says ``display: summarized`` (anthropics/claude-code#86959: Vertex rawPredict with
    ``display: summarized`` returns the text, without it only a signature; #71599 and
    can1357/oh-my-pi#1373 for Bedrock); Converse takes the same ``thinking`` through
    ``additionalModelRequestFields``, and adaptive thinking is thinking there too."""
    from metis.testing.emulator import Reply

    with Emulator(model=[Reply(thinking="Paris first", text="ok")] * 3) as emulator:
        omitted = _on_platform(emulator, platform, "claude-opus-4-7", {"type": "adaptive"})
        asked = {"type": "adaptive", "display": "summarized"}
        shown = _on_platform(emulator, platform, "claude-opus-4-7", asked)
        older = _on_platform(emulator, platform, "claude-sonnet-4-6", {"type": "adaptive"})
    assert (omitted, shown, older) == ("", "Paris first", "Paris first")
