"""Request validation as data: each API's 400 rules are a YAML table (``tables/<api>.yaml``)
of :class:`Rule` rows and named checks (functions, for what relates one part of a request to
another), read in order, the first broken rule refusing the request. The tables are the
documentation of what each API refuses (docs/emulator.md, "What it refuses").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metis.core.config_files import parse_yaml
from metis.errors import ConfigError
from metis.testing.emulator.wire import is_int, is_number
from metis.wire.refusal import Refusal


class _Missing:
    def __repr__(self) -> str:  # as a message shows a required value that is not there
        return "None"


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
    the ``*`` matched), ``{value}``, ``{type}`` (its Python type name) and ``{count}`` (a
    list's length). ``when`` limits the
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
                size = len(value) if isinstance(value, list) else 0
                fields = {"value": value, "type": type(value).__name__, "count": size}
                param = self.param.format(*indexes, **fields) if self.param else None
                raise Refused(self.message.format(*indexes, **fields), param, self.code)


Check = Callable[[dict[str, Any], Any], None]
"""A rule that relates parts of a request (a tool call and its answer) or needs the call's
context (which signatures are this emulator's): raises Refused."""


def first(find: Callable[[dict[str, Any]], Iterable[Refusal]]) -> Check:
    """A check that is one of the library's rules (metis/wire/refusal.py): the first refusal
    it finds refuses the request."""

    def check(body: dict[str, Any], context: Any = None) -> None:
        for refusal in find(body):
            raise Refused(*refusal)

    return check


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
    empty choice standing for a missing ``type``), ``*[type!=a|b]`` the others; conditions
    joined by ``,`` must all hold."""
    if head == "*":
        return lambda item: True
    tests = [_condition(text) for text in head[2:-1].split(",")]
    return lambda item: isinstance(item, dict) and all(test(item) for test in tests)


def _condition(text: str) -> Callable[[dict[str, Any]], bool]:
    key, _, choices = text.partition("=")
    allowed, negated = set(choices.split("|")), key.endswith("!")
    key = key.rstrip("!")
    return lambda item: (str(item.get(key, "")) in allowed) != negated


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


def one_of(*allowed: Any) -> Test:
    return lambda value: isinstance(value, str | int | float | bool | None) and value in allowed


BUILT_IN: dict[str, Test] = {
    "string": lambda value: isinstance(value, str),
    "text": lambda value: isinstance(value, str) and bool(value),
    "filled": lambda value: isinstance(value, str) and bool(value.strip()),
    "blank": lambda value: not value.strip(),
    "boolean": lambda value: isinstance(value, bool),
    "number": is_number,
    "array": lambda value: isinstance(value, list),
    "nonempty": lambda value: isinstance(value, list) and bool(value),
    "object": lambda value: isinstance(value, dict),
    "anything": lambda value: True,
    "never": lambda value: False,
    "absent": lambda value: value is None or value is MISSING,
    "falsy": lambda value: value is MISSING or not value,
}
"""The tests a row names: ``text`` is a non-empty string, ``filled`` one with more than
whitespace, ``nonempty`` a list with an item, ``never`` fails whenever the value is there (a
field the request may not have), ``absent`` holds for null or missing."""
SPECS: dict[str, Callable[[Any], Test]] = {
    "at least": lambda low: lambda value: is_int(value) and value >= low,
    "at most": lambda high: lambda value: not is_number(value) or value <= high,
    "not below": lambda low: lambda value: not is_number(value) or value >= low,
    "between": lambda bounds: lambda value: is_number(value) and bounds[0] <= value <= bounds[1],
    "matches": lambda pattern: (
        lambda value: isinstance(value, str) and re.fullmatch(pattern, value) is not None
    ),
    "starts": lambda pattern: (
        lambda value: isinstance(value, str) and re.match(pattern, value) is not None
    ),
    "items at most": lambda high: lambda value: not isinstance(value, list) or len(value) <= high,
    "one given of": lambda keys: (
        lambda value: isinstance(value, dict) and sum(bool(value.get(k)) for k in keys) == 1
    ),
    "is": lambda same: lambda value: value is same,
    "has": lambda key: lambda value: isinstance(value, dict) and key in value,
    "unique": lambda key: (
        lambda value: (
            not isinstance(value, list)
            or _unique([item.get(key) for item in value if isinstance(item, dict)])
        )
    ),
}
"""The tests with an argument: ``{at least: 1}`` (an integer), ``{at most: 2}`` and ``{not below:
0}`` (a number, or anything else: another row checks the type), ``{between: [0, 2]}``,
``{items at most: n}`` (a list of at most n items, or anything else), ``{one given of: [a,
b]}`` (an object with exactly one of them not empty), ``{matches: regex}`` (the
whole string), ``{starts: regex}``, ``{is: true}``, ``{has: key}``,
``{unique: key}`` (a list of objects no two of which have the same ``key``); and, read by
:meth:`Table.test`, ``{one of: [a, b]}`` (or a name of the table's ``names``), ``{one key of:
...}`` (an object of one key, one of them), ``{either: [...]}``, ``{all: [...]}``, ``{not:
...}``, ``{each: ...}`` (a list whose items pass) and ``{fields: {key: test}}`` (an object whose
fields pass)."""


# --- tables --------------------------------------------------------------------------------------

TABLES = Path(__file__).parent / "tables"
"""The rule tables, one YAML file per API (docs/emulator.md, "What it refuses")."""
ROW_KEYS = frozenset(
    names("at as test message param code required nullable when what example says")
)


OTHER_ROW_KEYS = {"group": {"group"}, "check": {"check", "example", "says", "status"}}


@dataclass(frozen=True)
class Table:
    """One API's table read: its names, templates and groups, and the checks the module that
    reads it names."""

    name: str
    data: dict[str, Any]
    checks: dict[str, Check]

    def wrong(self, problem: str) -> ConfigError:
        return ConfigError(f"metis/testing/emulator/tables/{self.name}.yaml: {problem}")

    def test(self, spec: Any) -> Test:
        if isinstance(spec, str):
            if spec not in BUILT_IN:
                raise self.wrong(f"unknown test {spec!r}")
            return BUILT_IN[spec]
        ((kind, argument),) = spec.items()
        if kind == "one of":
            return one_of(*self.choices(argument))
        if kind == "one key of":
            keys = self.choices(argument)
            return lambda value: (
                isinstance(value, dict) and len(value) == 1 and next(iter(value)) in keys
            )
        if kind == "either":
            anyof = [self.test(s) for s in argument]
            return lambda value: any(t(value) for t in anyof)
        if kind == "all":
            every = [self.test(s) for s in argument]
            return lambda value: all(t(value) for t in every)
        if kind == "each":
            each = self.test(argument)
            return lambda value: isinstance(value, list) and all(each(v) for v in value)
        if kind == "not":
            negated = self.test(argument)
            return lambda value: not negated(value)
        if kind == "fields":
            tests = {key: self.test(s) for key, s in argument.items()}
            return lambda value: (
                isinstance(value, dict) and all(t(value.get(key)) for key, t in tests.items())
            )
        if kind not in SPECS:
            raise self.wrong(f"unknown test {kind!r}")
        return SPECS[kind](argument)

    def choices(self, argument: Any) -> tuple[Any, ...]:
        """A list of values, or a name of the table's ``names`` (its words)."""
        return (
            tuple(argument) if isinstance(argument, list) else names(self.data["names"][argument])
        )

    def every_row(self, rows: list[Any] | None = None) -> Iterator[dict[str, Any]]:
        """Each row, a group's in its place."""
        for row in self.data["rules"] if rows is None else rows:
            kind = "group" if "group" in row else "check" if "check" in row else None
            if kind is not None and not set(row) <= OTHER_ROW_KEYS[kind]:
                raise self.wrong(f"a {kind} row with unknown keys: {row}")
            if kind == "group":
                yield from self.every_row(self.data["groups"][row["group"]])
            else:
                yield row

    def rule(self, row: dict[str, Any]) -> Rule:
        row = dict(row)
        template = next((t for t in self.data.get("templates", {}) if t in row), None)
        if template is not None:
            if "at" in row:
                raise self.wrong(f"a row with both `at` and a template: {row}")
            where = row.pop(template)
            row = {**self.data["templates"][template], **row, "at": where}
        unknown = set(row) - ROW_KEYS
        if unknown:
            raise self.wrong(f"a row with unknown keys {sorted(unknown)}: {row}")
        where = row["at"]
        when = [(path.split("."), self.test(s)) for path, s in row.get("when", {}).items()]
        return Rule(
            where,
            self.test(row.get("test", "anything")),
            self.words(row["message"], row),
            self.words(row["param"], row) if "param" in row else None,
            row.get("code"),
            row.get("required", False),
            (lambda body: all(t(_first(body, p)) for p, t in when)) if when else None,
            row.get("nullable", True),
        )

    def words(self, text: str, row: dict[str, Any]) -> str:
        """A template's message for ``row``: ``<at>`` is where it is, as the API names it,
        ``<param>`` as OpenAI's ``param`` does, ``<what>`` the row's, ``<allowed>`` its
        choices."""
        named = {
            "<at>": row.get("as") or placeholders(row["at"], self.data.get("brackets", False)),
            "<param>": placeholders(row["at"], brackets=True),
            "<what>": str(row.get("what", "")),
        }
        if "<allowed>" in text:
            named["<allowed>"] = listing(self.choices(row["test"]["one of"]))
        for key, value in named.items():
            text = text.replace(key, value)
        return text


LOADED: dict[str, Table] = {}
"""Each table the formats have read, by name."""


def read(name: str, checks: dict[str, Check] | None = None) -> Table:
    """``tables/<name>.yaml`` with what it takes from its ``base`` table (names, templates,
    groups)."""
    data = _load(name)
    base = data.get("base")
    if base is not None:
        shared = _load(base)
        for key in ("names", "templates", "groups"):
            data[key] = {**shared.get(key, {}), **data.get(key, {})}
        data.setdefault("brackets", shared.get("brackets", False))
    return Table(name, data, checks or {})


def table(
    name: str, checks: dict[str, Check] | None = None, names_as: dict[str, str] | None = None
) -> list[Rule | Check]:
    """The rules of ``tables/<name>.yaml`` in order: each row a :class:`Rule`, or a ``check``
    named in ``checks``. ``names_as`` reads a name of the table's ``names`` as another
    (``{"top level": "compact"}``: an endpoint that takes other fields)."""
    reader = read(name, checks)
    for key, other in (names_as or {}).items():
        reader.data["names"][key] = reader.data["names"][other]
    rows = list(reader.every_row())
    named = {row["check"] for row in rows if "check" in row}
    if named != set(reader.checks):
        differ = sorted(named ^ set(reader.checks))
        raise reader.wrong(f"the checks named and given differ: {differ}")
    rules = [reader.checks[r["check"]] if "check" in r else reader.rule(r) for r in rows]
    if names_as is None:
        LOADED[name] = reader
    return rules


def _unique(values: list[Any]) -> bool:
    return all(values.index(value) == i for i, value in enumerate(values))


def _load(name: str) -> dict[str, Any]:
    path = TABLES / f"{name}.yaml"
    data: dict[str, Any] = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    return data


def _first(body: Any, parts: list[str]) -> Any:
    return next((value for _, value in _walk(body, parts, ())), MISSING)


def listing(allowed: Sequence[Any]) -> str:
    """Names as OpenAI lists them: ``'a' and 'b'``, ``'a', 'b', and 'c'``."""
    listed = [f"'{a}'" for a in allowed]
    return (
        " and ".join(listed) if len(listed) < 3 else ", ".join(listed[:-1]) + f", and {listed[-1]}"
    )
