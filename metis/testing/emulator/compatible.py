"""OpenAI Chat Completions at the paths OpenAI-compatible services use and OpenAI does not.

The format, errors and authentication are OpenAI's (metis.testing.emulator.openai_chat); only the
paths differ: Fireworks' ``/inference/v1``, DeepInfra's ``/v1/openai``, Z.ai's
``/api/paas/v4`` and Alibaba DashScope's ``/compatible-mode/v1``.
"""

from __future__ import annotations

from metis.testing.emulator.openai_chat import OpenAIChat

COMPATIBLE_PATHS = frozenset(
    {
        "/inference/v1/chat/completions",
        "/v1/openai/chat/completions",
        "/api/paas/v4/chat/completions",
        "/compatible-mode/v1/chat/completions",
    }
)


class CompatibleChat(OpenAIChat):
    name = "openai"  # faults and counters as for OpenAI Chat itself

    def route(self, method: str, path: str) -> str | None:
        return "chat" if method == "POST" and path in COMPATIBLE_PATHS else None

    def allowed_methods(self, path: str) -> list[str]:
        return ["POST"] if path in COMPATIBLE_PATHS else []


# The long-tail stacks, by the emulator provider that serves their format.
LONG_TAIL_ALIASES = {
    **dict.fromkeys(
        ["xai", "cerebras", "fireworks", "perplexity", "deepinfra", "nebius", "sambanova"],
        "openai",
    ),
    **dict.fromkeys(["moonshot", "zai", "minimax", "dashscope"], "openai"),
    "open_responses": "openai_responses",
}
