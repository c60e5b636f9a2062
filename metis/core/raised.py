"""The one exception a task group's failure is about.

A task group wraps what its tasks raise in a ``BaseExceptionGroup``, even a lone one; where the
tasks are only a way to run calls concurrently (a reply's tool calls), what the caller should
meet is the exception as a single call would raise it: ``except SystemExit`` must see it.
"""

from __future__ import annotations

__all__ = ["first_raised"]


def first_raised(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group`` (nested groups opened); when several tasks raised,
    the first of them stands for the others."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and found.exceptions:
        found = found.exceptions[0]
    return found
