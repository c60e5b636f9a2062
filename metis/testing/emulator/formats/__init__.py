"""The wire formats the emulator speaks, one :class:`~.base.Format` each, in the order a
request's path is matched against them."""

from __future__ import annotations

from metis.testing.emulator.formats.anthropic import Anthropic
from metis.testing.emulator.formats.base import Format
from metis.testing.emulator.formats.batches import AnthropicBatches, GeminiBatches
from metis.testing.emulator.formats.batches_openai import AzureBatches, OpenAIBatches
from metis.testing.emulator.formats.bedrock import Bedrock
from metis.testing.emulator.formats.chat import Chat
from metis.testing.emulator.formats.cloud import CLOUD
from metis.testing.emulator.formats.embeddings import AzureEmbeddings, Cohere, OpenAIEmbeddings
from metis.testing.emulator.formats.embeddings_cloud import EMBEDDINGS
from metis.testing.emulator.formats.files_upload import AnthropicFiles
from metis.testing.emulator.formats.gemini import Gemini
from metis.testing.emulator.formats.gemini_caches import GeminiCaches
from metis.testing.emulator.formats.gemini_files import GeminiFiles
from metis.testing.emulator.formats.ollama import Ollama
from metis.testing.emulator.formats.responses import Responses
from metis.testing.emulator.rules import names


def all_formats() -> list[Format]:
    return [
        OpenAIEmbeddings(),
        AzureEmbeddings(),
        Cohere(),
        *(embeddings() for embeddings in EMBEDDINGS),
        AnthropicBatches(),
        AnthropicFiles(),
        OpenAIBatches(),
        AzureBatches(),
        GeminiBatches(),
        GeminiCaches(),
        GeminiFiles(),
        Anthropic(),
        Responses(),
        Gemini(),
        Ollama(),
        Bedrock(),
        *(cloud() for cloud in CLOUD),
        Chat(),
    ]


# The names a test or a stack may give a provider, by the format that serves it.
_SERVED_BY: dict[str, str | None] = {
    **dict.fromkeys(["anthropic", "claude"], "anthropic"),
    **dict.fromkeys(["openai", "openai_chat", "chat"], "openai"),
    **dict.fromkeys(["openai_responses", "responses", "open_responses"], "openai_responses"),
    **dict.fromkeys(["gemini", "google"], "gemini"),
    "ollama": "ollama",
    **dict.fromkeys(["cohere", "voyage"], None),
    **dict.fromkeys(["bedrock", "bedrock_anthropic", "bedrock_mantle"], "bedrock"),
    **dict.fromkeys(["vertex", "vertex_anthropic", "azure", "azure_responses"], None),
    **dict.fromkeys(
        names(
            "deepseek groq mistral openrouter together vllm llamacpp tgi xai cerebras fireworks "
            "perplexity deepinfra nebius sambanova moonshot zai minimax dashscope"
        ),
        "openai",
    ),
}
ALIASES = {name: served or name for name, served in _SERVED_BY.items()}
MOUNTS = {"azure": "/azure", "azure_responses": "/azure"}
