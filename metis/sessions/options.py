"""The options a session takes, checked where they are given: the constructor's, the defaults
assigned later, and each turn's (a misspelt one named with the nearest, docs/calls.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from metis.calls import request as call_request
from metis.calls.option_types import check_option_types
from metis.calls.request import ModelOptions
from metis.core.options import check_options
from metis.errors import ConfigError
from metis.tool_making import tool_list

SESSION_OPTIONS = ModelOptions.__optional_keys__
"""The model options a session keeps as defaults and a turn may override."""
OWN_OPTIONS = frozenset({"messages", "session_id", "adapters", "compact", "context_check"})
"""The constructor's own keywords, named as the nearest option to a misspelt one."""
RUN_OPTIONS = frozenset({"max_steps", "tool_timeout_seconds", "output_type", "on_event"})
"""``run``'s own keywords: named as the nearest to a misspelt one, and said to be ``run``'s
when a turn of one call is given one."""
HINTS = {
    "session_id": "the session's id is Session(session_id=...), set once",
    **{name: f"{name} is an option of run() (the agent loop)" for name in RUN_OPTIONS},
}


class OptionsRead(dict[str, Any]):
    """``session.options`` as read: a copy, which refuses a change that would be lost."""

    def _refused(self, *_: object, **__: object) -> NoReturn:
        raise ConfigError(
            "session.options is a copy, and a change made to it would be lost: give the session "
            "new ones, session.options = {**session.options, 'temperature': 0.2} (or take a "
            "copy of your own, dict(session.options))"
        )

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = _refused
    __ior__ = _refused

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (dict(self),)  # a copy (copy, deepcopy, pickle) is a plain dict


def check_constructor(options: Mapping[str, Any]) -> None:
    """``Session(...)``'s model options."""
    hints = {**call_request.settings_hints(options), **HINTS}
    check_options("Session()", options, SESSION_OPTIONS | OWN_OPTIONS, hints)
    check_option_types(options)
    _check_tools(options)


def check_defaults(options: Mapping[str, Any]) -> None:
    """Options assigned to ``session.options``."""
    check_options("Session.options", options, SESSION_OPTIONS, HINTS)
    check_option_types(options)
    _check_tools(options)


def checked_turn(what: str, options: Mapping[str, Any]) -> ModelOptions:
    """A turn's options, checked: they override the session's, read at each call."""
    known = SESSION_OPTIONS | RUN_OPTIONS if what in ("run", "arun") else SESSION_OPTIONS
    check_options(f"Session.{what}()", options, known, HINTS)
    check_option_types(options)
    checked: ModelOptions = {**options}  # type: ignore[typeddict-item]
    return checked


def _check_tools(options: Mapping[str, Any]) -> None:
    """``tools=`` kept for every turn is checked as it is given, not at the first turn."""
    if options.get("tools") is not None:
        tool_list(options["tools"])
