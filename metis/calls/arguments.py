"""The one-line calls' positional arguments checked by metis: a call without its messages
(``metis.complete(model, prompt="Hi")``, as other libraries take them) says where they go and
names the option it did not take, rather than Python's 'missing 1 required positional
argument'."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from metis.calls.request import MESSAGES_HINT, check_call_options
from metis.core.options import keyword_names
from metis.errors import InvalidRequestError

P = ParamSpec("P")
R = TypeVar("R")


def refuse_without_messages(call: str, options: dict[str, Any], *also: str) -> None:
    """Raise for a call given no messages: the option it did not take first, if any."""
    check_call_options(call, options, *also)
    raise InvalidRequestError(f"metis.{call}() got no messages; {MESSAGES_HINT.format(call=call)}")


def needs_messages(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` (a one-line call taking ``model, messages``), refusing a call without its
    messages with a metis error before Python's own TypeError."""
    call = function.__name__
    own = keyword_names(function) - {"model", "messages"}

    def missing(args: tuple[object, ...], kwargs: dict[str, Any]) -> bool:
        return len(args) < 2 and "messages" not in kwargs

    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def checked_async(*args: P.args, **kwargs: P.kwargs) -> Any:
            if missing(args, kwargs):
                refuse_without_messages(call, kwargs, *own)
            return await function(*args, **kwargs)

        return cast(Callable[P, R], checked_async)

    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if missing(args, kwargs):
            refuse_without_messages(call, kwargs, *own)
        return function(*args, **kwargs)

    return checked
