"""Lone UTF-16 surrogates in text read from outside, replaced by U+FFFD.

A JSON ``\\uD83D`` escape decodes to a lone surrogate, a ``str`` that cannot be encoded as
UTF-8: printing it, logging it or sending it on raises ``UnicodeEncodeError``. The codecs'
streaming helpers (:mod:`metis.wire.unicode_text`) build on :func:`clean`; the canonical model
uses it for the words it keeps as given.
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """``text`` with surrogate pairs joined and every lone surrogate replaced by U+FFFD."""
    if text.isascii() or not SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
