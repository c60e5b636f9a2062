"""Every built-in stack on metis.testing.emulator: its model, the format serving it, and an
adapter built for it (tests/conformance/test_conformance.py runs the suite over this table).

The emulator speaks each provider's wire format and refuses, with the real API's 400, what
that API would refuse. Vertex and Azure run at their own paths with their own authentication
(a faked Google credential, an ``api-key``); the OpenAI-compatible long tail is served by the
emulator's OpenAI Chat endpoint at each provider's path. The seven compatible stacks without
an emulated path are checked for their own quirks in
tests/conformance/test_compatible_stacks.py.
"""

from __future__ import annotations

import datetime
from typing import Any

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import CanonicalRequest, Message, MessageComplete, StreamEvent, ToolDefinition
from metis.pipeline.stores import InMemoryToolIdStore, ToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.testing.emulator import Emulator

FAMILIES = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "ollama": "ollama:qwen3",
    "groq": "groq:llama-3.3-70b-versatile",
    "tgi": "tgi:tgi",
    "bedrock": "bedrock:us.amazon.nova-pro-v1:0",
    "bedrock_anthropic": "bedrock_anthropic:us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_mantle": "bedrock_mantle:openai.gpt-oss-120b-1:0",
}
CLOUD = {
    "vertex": "vertex:gemini-2.5-flash",
    "vertex_anthropic": "vertex_anthropic:claude-sonnet-4-5@20250929",
    "azure": "azure:my-gpt-4o-deployment",
    "azure_responses": "azure_responses:my-gpt-5-deployment",
}
LONG_TAIL = {
    "xai": "xai:grok-4",
    "cerebras": "cerebras:gpt-oss-120b",
    "fireworks": "fireworks:accounts/fireworks/models/kimi-k2-instruct",
    "perplexity": "perplexity:sonar-pro",
    "deepinfra": "deepinfra:meta-llama/Llama-3.3-70B-Instruct",
    "nebius": "nebius:meta-llama/Llama-3.3-70B-Instruct",
    "sambanova": "sambanova:Meta-Llama-3.3-70B-Instruct",
    "moonshot": "moonshot:kimi-k2-0905-preview",
    "zai": "zai:glm-4.6",
    "minimax": "minimax:MiniMax-M2",
    "dashscope": "dashscope:qwen-plus",
    "open_responses": "open_responses:some-model",
}
WEBSOCKET = {  # OpenAI's and Azure's Responses over WebSocket (docs/websocket.md)
    "openai_responses_ws": "openai_responses_ws:gpt-5",
    "azure_responses_ws": "azure_responses_ws:my-gpt-5-deployment",
}
MODELS = {**FAMILIES, **CLOUD, **LONG_TAIL, **WEBSOCKET}
"""Every stack the emulator serves, with the model the suite asks it for."""
EMULATED_AS = {
    **dict.fromkeys(LONG_TAIL, "openai"),
    "groq": "openai",
    "tgi": "openai",
    "bedrock_anthropic": "bedrock",
    "bedrock_mantle": "openai",
    "open_responses": "openai_responses",
    "openai_responses_ws": "openai_responses",
    "azure_responses_ws": "azure_responses",
}
NO_TOOLS = {"perplexity"}  # Sonar has no tool calling: the stack refuses tools unsent
TOKEN = "ya29.test-token"
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
DEADLINE = 20.0


def google_credentials() -> Any:
    """A google-auth credential holding a valid token (the test extra installs google-auth)."""
    from google.oauth2.credentials import Credentials

    expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
    return Credentials(token=TOKEN, expiry=expiry)


def adapter(
    stack: str, emulator: Emulator, store: ToolIdStore | None = None, **config: Any
) -> Adapter:
    """``stack``'s adapter against the emulator (its retries wait only where a test does not
    use the ``no_backoff`` fixture)."""
    settings: dict[str, Any] = {}
    api_key: str | None = "test-key"
    if stack.startswith("vertex"):
        settings = {"project": "proj-1", "location": "us-east5"}
        settings["google_credentials"] = google_credentials()
        api_key = None
    capabilities = {"supports_tools": True} if stack == "ollama" else {}
    capabilities.update(config.pop("capabilities", {}))
    built = AdapterConfig(
        api_key=api_key,
        base_url=emulator.base_url(target(stack)),
        settings=settings,
        capabilities=capabilities,
        **config,
    )
    return build_adapter(stack, built, tool_id_store=store or InMemoryToolIdStore())


def target(stack: str) -> str:
    """The emulated provider serving ``stack`` (where its faults are pushed)."""
    return EMULATED_AS.get(stack, stack)


def request(
    stack: str, text: str = "What's the weather in Paris?", **fields: Any
) -> CanonicalRequest:
    fields.setdefault("tools", [] if stack in NO_TOOLS else [WEATHER])
    return CanonicalRequest(
        model=MODELS[stack],
        session_id=f"conformance-{stack}",
        messages=[Message.user(text)],
        max_output_tokens=512,
        **fields,
    )


def story(stack: str) -> CanonicalRequest:
    """A long answer without tools, for faults that strike mid-stream."""
    return request(stack, "Tell me a long story about the sea.", tools=[])


def checked(events: list[StreamEvent]) -> MessageComplete:
    """The stream's final event, after the stream invariants held over every event."""
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


ROTATION = [
    "anthropic",
    "bedrock",
    "vertex",
    "azure",
    "openai_responses",
    "bedrock_anthropic",
    "gemini",
    "vertex_anthropic",
    "azure_responses",
    "openai",
    "groq",
    "ollama",
]
"""One stack of each family on each platform, in the order a conversation visits them."""


def ask(stack: str, history: list[Message], **fields: Any) -> CanonicalRequest:
    """The next turn of a conversation that moves between stacks, with the weather tool."""
    return CanonicalRequest(
        model=MODELS[stack],
        session_id="everywhere",
        messages=history,
        tools=[WEATHER],
        max_output_tokens=2048,
        **fields,
    )
