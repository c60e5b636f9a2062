"""Whether a text is a whole number ``int()`` reads: ASCII digits only.

``str.isdigit()`` alone is true for "²" and other Unicode digits that ``int()`` refuses (a bare
ValueError), so every check of text from outside before ``int()`` goes through here."""

from __future__ import annotations


def ascii_digits(text: str) -> bool:
    """``text`` is one or more ASCII digits (no sign, no space)."""
    return text.isascii() and text.isdigit()
