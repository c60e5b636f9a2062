"""The nearest known names to a misspelt one, for error messages that say what was meant."""

from __future__ import annotations

from collections.abc import Iterable


def closest(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``known`` nearest to ``name``, nearest first, case ignored."""
    by_lower: dict[str, str] = {}
    for candidate in known:
        by_lower.setdefault(candidate.lower(), candidate)
    import difflib  # only a misspelt name needs it

    found = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[match] for match in found]


def did_you_mean(name: str, known: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'x' or 'y'?"`` for the nearest of ``known``, or ``""``."""
    found = closest(name, known, n)
    return f"; did you mean {' or '.join(repr(c) for c in found)}?" if found else ""
