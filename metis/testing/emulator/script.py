"""The scripted mode: the emulator's model answers from a script, or is a function a test
writes, instead of the built-in scripted model (:class:`~.responder.Responder`)::

    with Emulator(model=[tools(("get_weather", {"city": "Paris"})), "It is sunny."]) as emu:
        ...  # every format, in turn, answers from the one script

    def model(prompt: Prompt) -> Reply | str:
        return f"{len(prompt.turns)} turns"

    Emulator(model=model)

A reply is a :class:`~.model.Reply`, a string (its text), or a function of the
:class:`~.model.Prompt` that returns one (as pydantic-ai's ``FunctionModel``). Whatever the
format, the request is checked by its provider's rules before the model sees it, and the
reply is rendered (ids, signatures, usage, streaming) as that provider would send it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from metis.errors import ConfigError
from metis.testing.emulator.model import CallOut, Model, Prompt, Reply, Usage

ReplyLike = Reply | str | Callable[[Prompt], Any]


class ScriptError(Exception):
    """The script cannot answer: it has run out, or gave something that is not a reply. The
    request is refused with a 400 in its provider's format, saying so."""


def text(value: str) -> Reply:
    return Reply(text=value)


def tools(*calls: tuple[str, dict[str, Any]], say: str = "") -> Reply:
    """A reply that calls tools (``("name", {"arg": ...})`` each), after ``say`` if given."""
    for index, call in enumerate(calls):
        if not (
            isinstance(call, tuple)
            and len(call) == 2
            and isinstance(call[0], str)
            and isinstance(call[1], dict)
        ):
            raise ConfigError(
                f"tools(): call {index} is {call!r:.60}; expected (name, arguments), as "
                "tools(('get_weather', {'city': 'Oslo'}))"
            )
    return Reply(text=say, calls=[CallOut(name, dict(args)) for name, args in calls])


def thinking(reasoning: str, then: Reply | str) -> Reply:
    """``then``, with ``reasoning`` first (each format signs it as its provider would)."""
    return replace(as_reply(then, None), thinking=reasoning)


def as_reply(item: Any, prompt: Prompt | None) -> Reply:
    """A fresh Reply from a script item (a Reply is copied: the emulator fills its usage)."""
    if callable(item) and not isinstance(item, Reply):
        if prompt is None:
            raise ScriptError("a reply function needs the prompt")
        item = item(prompt)
    if isinstance(item, str):
        return Reply(text=item)
    if isinstance(item, Reply):
        return replace(
            item, calls=[CallOut(c.name, dict(c.args)) for c in item.calls], usage=Usage()
        )
    raise ScriptError(f"a model answered {item!r}: expected a Reply or a string")


class Script:
    """Answers each request with the next reply of a list, whichever format asks, so one script
    can serve a conversation that moves between providers. ``prompts`` are the prompts it has
    answered, in order."""

    def __init__(self, replies: Iterable[ReplyLike]) -> None:
        self._replies: deque[ReplyLike] = deque(replies)
        self._lock = threading.Lock()
        self.prompts: list[Prompt] = []

    def __call__(self, prompt: Prompt) -> Reply:
        with self._lock:
            if not self._replies:
                raise ScriptError("the script has no more replies")
            item = self._replies.popleft()
            self.prompts.append(prompt)
        return as_reply(item, prompt)

    def extend(self, replies: Iterable[ReplyLike]) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)


class FunctionModel:
    """A function of the prompt as the model (its answers as :func:`as_reply` reads them)."""

    def __init__(self, function: Callable[[Prompt], Any]) -> None:
        self.function = function

    def __call__(self, prompt: Prompt) -> Reply:
        return as_reply(self.function(prompt), prompt)


def as_model(model: Model | Iterable[ReplyLike] | Callable[[Prompt], Any]) -> Model:
    """The model ``Emulator(model=...)`` describes: a list of replies is a :class:`Script`, a
    function a :class:`FunctionModel`; a Script, a Responder or a FunctionModel as it is."""
    if isinstance(model, Script | FunctionModel) or hasattr(model, "cache"):
        return model  # type: ignore[return-value]
    if callable(model):
        return FunctionModel(model)
    if isinstance(model, str | bytes) or not isinstance(model, Iterable):
        raise ConfigError(
            f"model={model!r:.60}: expected a list of replies (a string each is its text: "
            "model=['Hello']) or a function of the prompt"
        )
    replies = list(model)
    for index, item in enumerate(replies):
        if not (isinstance(item, Reply | str) or callable(item)):
            raise ConfigError(
                f"model[{index}] is {type(item).__name__} {item!r:.60}; expected a reply: a "
                "string, a Reply (text(), tools(), thinking(), ...) or a function of the prompt"
            )
    return Script(replies)
