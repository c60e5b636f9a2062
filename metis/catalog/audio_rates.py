"""The audio rates of the models that bill audio apart from text, USD per million tokens, by
catalog key: ``(input audio, output audio)``, None where the model bills no audio output.
The maintained catalog's sources give none of them to metis (genai-prices has them, as
``input_audio_mtok`` and ``output_audio_mtok``, but the catalog snapshot leaves them out), so
metis keeps them here, from genai-prices 0.2.3's data (the catalog's own source) and, for the
gpt-4o audio previews it lacks, OpenAI's pricing page. :mod:`metis.cost` prices
``TokenUsage.input_audio_tokens`` and ``output_audio_tokens`` at them (docs/contract.md §5)."""

from __future__ import annotations

from decimal import Decimal

_OPENAI: dict[str, tuple[str, str | None]] = {
    "gpt-4o-audio-preview": ("40", "80"),
    "gpt-4o-mini-audio-preview": ("10", "20"),
    "gpt-audio": ("32", "64"),
    "gpt-audio-mini": ("10", "20"),
    "gpt-realtime": ("32", "64"),
    "gpt-realtime-2": ("32", "64"),
    "gpt-realtime-mini": ("10", "20"),
    "gpt-4o-realtime-preview": ("40", "80"),
    "gpt-4o-mini-realtime-preview": ("10", "20"),
}
_GEMINI: dict[str, tuple[str, str | None]] = {
    "gemini-2.0-flash": ("0.7", None),
    "gemini-2.5-flash": ("1", None),
    "gemini-2.5-flash-lite": ("0.3", None),
    "gemini-3-flash-preview": ("1", None),
    "gemini-3.1-flash-lite": ("0.5", None),
}

AUDIO_RATES: dict[str, tuple[Decimal, Decimal | None]] = {
    f"{provider}/{model}": (Decimal(audio_in), None if audio_out is None else Decimal(audio_out))
    for providers, table in ((("openai",), _OPENAI), (("google", "google-vertex"), _GEMINI))
    for provider in providers
    for model, (audio_in, audio_out) in table.items()
}
