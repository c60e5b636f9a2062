"""Which catalog entries are a model's maker serving it, and which are a reseller's.

The catalog lists a model once per provider that serves it (``anthropic:claude-sonnet-4-5``,
``amazon-bedrock:anthropic.claude-sonnet-4-5-...``, ``openrouter:anthropic/claude-sonnet-4.5``
and dozens more); nothing in its data says who made it. The maker is read from the model's
name: its family (``claude``, ``gpt``, ``gemini``, ...) names the providers that make it.
"""

from __future__ import annotations

import re

from metis.catalog.model_info import ModelInfo

# A family's leading word -> the catalog providers that make the family (models.dev's ids).
_MAKERS: dict[str, frozenset[str]] = {
    family: frozenset(makers.split())
    for makers, families in (
        ("anthropic", "claude"),
        (
            "openai",
            "gpt chatgpt codex o1 o3 o4 davinci babbage ada text-embedding dall-e whisper tts "
            "omni-moderation computer-use sora",
        ),
        ("google", "gemini gemma imagen veo learnlm"),
        (
            "mistral",
            "mistral ministral codestral devstral magistral pixtral voxtral mixtral open-mistral "
            "open-mixtral",
        ),
        ("deepseek", "deepseek"),
        ("xai", "grok"),
        ("alibaba alibaba-cn", "qwen qwq qvq"),
        ("moonshotai moonshotai-cn", "kimi moonshot"),
        ("zai zhipuai", "glm"),
        ("minimax minimax-cn", "minimax"),
        ("cohere", "command c4ai aya embed rerank"),
        ("perplexity", "sonar"),
        ("llama", "llama"),
        ("amazon-bedrock", "nova amazon"),
        ("inception", "mercury"),
    )
    for family in families.split()
}
_REGION = re.compile(r"^(?:us|eu|apac|ap|jp|au|ca|us-gov|global)\.")
_TAG = re.compile(r"^[a-z]+:(?=[a-z])")  # a fine-tune's ft:gpt-4o


def family_of(model_id: str) -> str | None:
    """The family ``model_id`` belongs to (``claude`` for ``us.anthropic.claude-...``), or None
    when its name says nothing the table knows."""
    name = _REGION.sub("", model_id.lower().rsplit("/", 1)[-1])
    name = _TAG.sub("", name)
    vendor, dot, rest = name.partition(".")
    if dot and vendor.isalpha():  # Bedrock ids: anthropic.claude-..., amazon.nova-...
        name = rest
    words = name.split("-")
    first = words[0]
    for candidate in ("-".join(words[:2]), first, first.rstrip("0123456789.")):
        if candidate in _MAKERS:
            return candidate
    return None


def is_first_party(info: ModelInfo) -> bool:
    """Whether ``info`` is its model's maker serving it."""
    family = family_of(info.id)
    return family is not None and info.provider in _MAKERS[family]
