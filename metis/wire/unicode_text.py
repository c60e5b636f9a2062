"""Lone UTF-16 surrogates in provider text: rejoined when split, replaced when alone.

A JSON ``\\uD83D`` escape decodes to a lone surrogate, a ``str`` that cannot be encoded
as UTF-8: printing it, logging it or sending it back to a provider raises
``UnicodeEncodeError``. Some servers cut a character outside the Basic Multilingual Plane
between two deltas as its two surrogate halves (``"\\uD83D"`` then ``"\\uDE00"``). The
message builder holds a trailing high surrogate until the next fragment of the same block
(:func:`joined`), and every surrogate still alone becomes U+FFFD (:func:`clean`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from metis.core.surrogates import REPLACEMENT, clean
from metis.core.surrogates import SURROGATE as _SURROGATE

__all__ = ["REPLACEMENT", "clean", "clean_model", "clean_value", "clean_words", "joined"]

_Model = TypeVar("_Model", bound=BaseModel)


def joined(held: str, text: str) -> tuple[str, str]:
    """``(text to keep, high surrogate to hold)`` for a fragment that follows ``held``."""
    text = held + text
    if not _SURROGATE.search(text):
        return text, ""
    hold = ""
    if "\ud800" <= text[-1] <= "\udbff":  # a high half: its low half may open the next one
        text, hold = text[:-1], text[-1]
    return clean(text), hold


def clean_value(value: Any) -> Any:
    """A decoded JSON value with :func:`clean` applied to every string in it (keys too): a
    copy when a string needed it, else the value itself (the usual case, found by a walk that
    builds nothing)."""
    if _all_clean(value):
        return value
    return _cleaned(value)


def clean_words(value: _Model) -> _Model:
    """A flat canonical object (a stop reason) with :func:`clean` applied to each of its
    string fields: itself when none needed it."""
    fields = value.__dict__
    for word in fields.values():
        if word.__class__ is str and not word.isascii() and _SURROGATE.search(word):
            break
    else:
        return value
    return value.model_copy(update={k: clean(v) for k, v in fields.items() if v.__class__ is str})


def clean_model(value: _Model) -> _Model:
    """A canonical object with :func:`clean` applied to every string in it, nested objects
    included (a citation, a server tool's block): itself when none needed it."""
    dumped = value.model_dump()
    if _all_clean(dumped):
        return value
    return type(value).model_validate(_cleaned(dumped))


def _all_clean(value: Any) -> bool:
    """Whether no string in ``value`` (keys included) holds a surrogate."""
    pending = [value]
    while pending:
        item = pending.pop()
        cls = item.__class__
        if cls is str:
            if not item.isascii() and _SURROGATE.search(item):
                return False
        elif cls is dict:
            for key, inner in item.items():
                if key.__class__ is str and not key.isascii() and _SURROGATE.search(key):
                    return False
                if inner.__class__ in _NESTED:
                    pending.append(inner)
                elif inner.__class__ is str and not inner.isascii() and _SURROGATE.search(inner):
                    return False
        elif cls is list:
            pending.extend(item)
    return True


_NESTED = (dict, list)


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean(k) if isinstance(k, str) else k: _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value
