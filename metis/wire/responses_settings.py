"""The settings of the OpenAI Responses codec, checked without loading it (a stack's
``codec_settings`` are checked when its adapter is built; the codec loads with the first call)."""

from __future__ import annotations

from typing import Any

from metis.errors import StackError

ALLOWED: dict[str, tuple[Any, ...]] = {
    "store": (True, False),
    "include_encrypted_reasoning": ("auto", "always", "never"),
    "file_urls": (True, False),
}


def check_settings(settings: dict[str, Any]) -> None:
    """Raise StackError for a setting the codec does not have or a value it does not take."""
    for key, value in settings.items():
        if key not in ALLOWED:
            raise StackError(
                f"codec 'openai_responses': unknown setting {key!r} (its settings: "
                f"{', '.join(ALLOWED)})"
            )
        if value not in ALLOWED[key] or type(value) is not type(ALLOWED[key][0]):
            choices = ", ".join(str(v).lower() for v in ALLOWED[key])
            raise StackError(f"codec 'openai_responses': {key} is one of {choices}")
