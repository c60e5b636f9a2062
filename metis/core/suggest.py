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


def misspelt_as(name: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that ``name`` is a misspelling of: the nearest, and only when a
    few typing slips (a letter wrong, missing, extra or swapped; one in three letters) make one
    from the other, so a word that merely shares letters with a name is left unmatched."""
    most = max(1, len(name) // 3)
    for candidate in closest(name, known, n=3, cutoff=0.5):
        if _slips(name.lower(), candidate.lower()) <= most:
            return candidate
    return None


def _slips(a: str, b: str) -> int:
    """The edits from ``a`` to ``b``: a letter changed, dropped, added, or two swapped."""
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            swapped = i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]
            if swapped:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[len(b)]
