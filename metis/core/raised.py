"""The one exception a task group's failure is about.

A task group wraps what its tasks raise in a ``BaseExceptionGroup``, even a lone one; where the
tasks are only a way to run calls concurrently (a reply's tool calls), what the caller should
meet is the exception as a single call would raise it: ``except SystemExit`` must see it.

A task must not end with ``KeyboardInterrupt`` or ``SystemExit`` of the application's under
asyncio, which stops its loop on them there and then (the group's other tasks and every
clean-up left undone, the connections open), nor with any other ``BaseException`` in a task
of anyio's blocking portal, which ends the portal; nor with a ``CancelledError`` the
application raised of its own (a task it awaited was cancelled), which anyio's task group
reads as the task cancelled and drops: :func:`carrying` runs such a task and
carries what it raised out as an ``Exception`` (:class:`Carried`), which :func:`first_raised`
and :func:`uncarried` raise as it was raised.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ["Carried", "carrying", "first_raised", "is_cancellation", "is_stray_cancel", "uncarried"]

T = TypeVar("T")


class Carried(Exception):
    """What a task raised that is neither an ``Exception`` nor its loop's cancellation."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(raised)
        self.raised = raised


async def carrying(function: Callable[..., Awaitable[T]], *args: object) -> T:
    """``await function(*args)``; a ``BaseException`` it raises that is not the loop's
    cancellation comes out as a :class:`Carried`."""
    try:
        return await function(*args)
    except Exception:
        raise
    except BaseException as raised:
        if is_cancellation(raised):
            raise
        raise Carried(raised) from None


def is_cancellation(raised: BaseException) -> bool:
    """Whether ``raised`` is the running task's cancellation (the loop's cancelled exception,
    its task asked to cancel). Under asyncio, a CancelledError the application raised (of a
    task it awaited, cancelled elsewhere) finds its own task asked to cancel by no one, where
    a cancel scope or ``task.cancel()`` asks first."""
    if not isinstance(raised, anyio.get_cancelled_exc_class()):
        return False
    asyncio = sys.modules.get("asyncio")  # imported by a loop raising its CancelledError
    if asyncio is None or not isinstance(raised, asyncio.CancelledError):
        return True  # trio's Cancelled: only trio raises it
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def is_stray_cancel(raised: BaseException) -> bool:
    """Whether ``raised`` is an asyncio ``CancelledError`` that is not the running task's
    cancellation (one of a task the code awaited, cancelled elsewhere): that code's failure."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None or not isinstance(raised, asyncio.CancelledError):
        return False
    return not is_cancellation(raised)


def uncarried(error: BaseException) -> BaseException:
    """What ``error`` carries, or ``error`` itself."""
    return error.raised if isinstance(error, Carried) else error


def first_raised(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group`` (nested groups opened, a carried one as raised); when
    several tasks raised, the first of them stands for the others."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and found.exceptions:
        found = found.exceptions[0]
    return uncarried(found)
