"""Request validation as data: each provider's 400 rules are a table of :class:`Rule` rows (and
a few functions for what relates one part of a request to another), read in order, the first
broken rule refusing the request. The tables in the format modules are the documentation of
what each API refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from metis.testing.emulator.wire import is_int, is_number


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
Test = Callable[[Any], bool]


class Refused(Exception):
    """A request a rule refuses; the format shapes it as its provider's error."""

    def __init__(
        self, message: str, param: str | None = None, code: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.code, self.status = message, param, code, status


@dataclass(frozen=True, slots=True)
class Rule:
    """The value at ``where`` must pass ``test``, else the request is refused with ``message``.

    ``where`` is a dotted path into the body: ``*`` stands for each item of a list, ``~`` for
    each key of an object (the key is the value tested). A missing value passes unless the
    rule is ``required`` (and the object that would hold it is there). ``message`` and
    ``param`` may name ``{0}``, ``{1}``... (the indexes
    the ``*`` matched), ``{value}`` and ``{type}`` (its Python type name). ``when`` limits the
    rule to bodies it holds for. ``code`` is OpenAI's error code.
    """

    where: str
    test: Test
    message: str
    param: str | None = None
    code: str | None = None
    required: bool = False
    when: Callable[[dict[str, Any]], bool] | None = None
    nullable: bool = True

    def check(self, body: dict[str, Any], context: Any = None) -> None:
        if self.when is not None and not self.when(body):
            return
        parts = self.where.split(".") if self.where else []
        named = bool(parts) and parts[-1] not in ("*", "~")
        for indexes, value in _walk(body, parts, ()):
            if value is None and named and self.nullable:
                value = MISSING
            if value is MISSING and not self.required:
                continue
            if value is MISSING or not self.test(value):
                fields = {"value": value, "type": type(value).__name__}
                param = self.param.format(*indexes, **fields) if self.param else None
                raise Refused(self.message.format(*indexes, **fields), param, self.code)


Check = Callable[[dict[str, Any], Any], None]
"""A rule that relates parts of a request (a tool call and its answer) or needs the call's
context (which signatures are this emulator's): raises Refused."""


def check(rules: Sequence[Rule | Check], body: dict[str, Any], context: Any = None) -> None:
    """Applies ``rules`` in order; the first that breaks raises :class:`Refused`."""
    for rule in rules:
        rule.check(body) if isinstance(rule, Rule) else rule(body, context)


def _walk(
    value: Any, parts: list[str], at: tuple[int, ...]
) -> Iterator[tuple[tuple[int, ...], Any]]:
    if not parts:
        yield at, value
        return
    head, rest = parts[0], parts[1:]
    if head.startswith("*"):
        keep = _filter(head)
        for index, item in enumerate(value if isinstance(value, list) else ()):
            if keep(item):
                yield from _walk(item, rest, (*at, index))
    elif head == "~":
        for key in value if isinstance(value, dict) else ():
            yield from _walk(key, rest, at)
    elif isinstance(value, dict):  # a missing field of a missing object is not looked for
        yield from _walk(value.get(head, MISSING), rest, at)


def _filter(head: str) -> Callable[[Any], bool]:
    """``*`` keeps every item; ``*[type=a|b]`` the objects whose ``type`` is one of them (an
    empty choice standing for a missing ``type``), ``*[type!=a|b]`` the others."""
    if head == "*":
        return lambda item: True
    key, _, choices = head[2:-1].partition("=")
    allowed, negated = set(choices.split("|")), key.endswith("!")
    key = key.rstrip("!")
    return lambda item: isinstance(item, dict) and (str(item.get(key, "")) in allowed) != negated


def placeholders(where: str, brackets: bool = False) -> str:
    """``where`` as a provider names it, each ``*`` its index's placeholder: ``messages.{0}.role``,
    or with ``brackets`` (OpenAI) ``messages[{0}].role``."""
    out: list[str] = []
    count = 0
    for part in where.split("."):
        if part.startswith("*"):
            index = "{" + str(count) + "}"
            count += 1
            if brackets and out:
                out[-1] += f"[{index}]"
            else:
                out.append(index)
        elif part != "~":
            out.append(part)
    return ".".join(out)


# --- tests ---------------------------------------------------------------------------------------


def names(text: str) -> tuple[str, ...]:
    """The words of ``text``: a table's list of names, written as prose."""
    return tuple(text.split())


def string(value: Any) -> bool:
    return isinstance(value, str)


def text(value: Any) -> bool:
    """A non-empty string."""
    return isinstance(value, str) and bool(value)


def boolean(value: Any) -> bool:
    return isinstance(value, bool)


def array(value: Any) -> bool:
    return isinstance(value, list)


def nonempty(value: Any) -> bool:
    """A list with at least one item."""
    return isinstance(value, list) and bool(value)


def obj(value: Any) -> bool:
    return isinstance(value, dict)


def number(value: Any) -> bool:
    return is_number(value)


def anything(value: Any) -> bool:
    """Any value (with ``required``: the field must be there)."""
    return True


def never(value: Any) -> bool:
    """Fails whenever the value is there (a field the request may not have)."""
    return False


def one_of(*allowed: Any) -> Test:
    return lambda value: _hashable(value) and value in allowed


def at_least(low: int) -> Test:
    return lambda value: is_int(value) and value >= low


def between(low: float, high: float) -> Test:
    return lambda value: is_number(value) and low <= value <= high


def at_most(high: float) -> Test:
    return lambda value: not is_number(value) or value <= high


def not_below(low: float) -> Test:
    return lambda value: not is_number(value) or value >= low


def matches(pattern: str) -> Test:
    compiled = re.compile(pattern)
    return lambda value: isinstance(value, str) and compiled.fullmatch(value) is not None


def either(*tests: Test) -> Test:
    return lambda value: any(test(value) for test in tests)


def typed(key: str, *tests: Test) -> Test:
    """An object whose ``key`` passes every test (``{"type": "text"}`` and the like)."""
    return lambda value: isinstance(value, dict) and all(t(value.get(key)) for t in tests)


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | None)
