"""The numeric options of the one-line calls and sessions, checked for their type before
anything is sent: Python takes ``True`` for the int ``1`` and pydantic's lax mode takes ``"3"``
for ``3``, so ``max_retries=True`` would otherwise be one retry, silently."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import InvalidRequestError

WHOLE = {
    "max_output_tokens": "a whole number of tokens >= 1",
    "max_retries": "a whole number of retries >= 0",
    "top_k": "a whole number >= 1",
    "seed": "a whole number",
}
NUMBER = {
    "temperature": "a number >= 0",
    "top_p": "a number from 0 to 1",
    "frequency_penalty": "a number",
    "presence_penalty": "a number",
    "timeout_seconds": "a number of seconds > 0",
}


def check_option_types(options: Mapping[str, Any]) -> None:
    """An InvalidRequestError for a numeric option that is not a number of its kind (a bool,
    a string, a float where a whole number is meant), saying what the option takes; ``None``
    is the option not given."""
    for name, value in options.items():
        if value is None or (name not in WHOLE and name not in NUMBER):
            continue
        kinds: tuple[type, ...] = (int,) if name in WHOLE else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            takes = WHOLE.get(name) or NUMBER[name]
            raise InvalidRequestError(
                f"{name}: expected {takes}, got {type(value).__name__} {value!r:.80}"
            )
