"""A tool's schema, prepared once: what the steps derive from one schema object (the sendable
check's verdict, the token estimate's text, strict mode's form) kept with it, found by the
object itself.

A conversation sends the same tools call after call: an application's own tool objects
(``metis.complete``, ``Session``), a gateway's tools read once per content
(metis/gateway/inbound.py, metis/gateway/frames.py). So what a step derives from a schema is
kept on the schema's record, found by its identity, and given only while the schema holds
what it held when the record was made: the record keeps a copy of it (marshal, version 2) and
compares the two with one ``==`` (in C) when it is found, so a schema an application changed in
place between calls is prepared anew (as metis/model/held.py does for a message's blocks;
values Python holds equal, ``1`` and ``1.0``, are one). A record holds its schema, so the
identity is not reused while it is kept; :data:`RECORDS_AT_MOST` are kept, the oldest
forgotten first. A schema marshal cannot write (an object of the application's) has no
record: each step derives its form afresh.

A schema and what is kept of it are shared by every call that sends it: no step changes
either in place (docs/stages.md, "Stages are shared"); a stage of the application's is given
its own copies (:func:`own_tools`, and the encoders' bodies made anew).
"""

from __future__ import annotations

import copy
import marshal
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from metis.model.request import CanonicalRequest

V = TypeVar("V")
RECORDS_AT_MOST = 1024
FORMS_AT_MOST = 64


class Prepared:
    """One schema object, the copy of what it held, and the forms derived from it."""

    __slots__ = ("forms", "held", "schema")

    def __init__(self, schema: Any, held: Any) -> None:
        self.schema, self.held = schema, held
        self.forms: dict[Hashable, Any] = {}


_RECORDS: dict[int, Prepared] = {}


def prepared(schema: Any) -> Prepared | None:
    """The record of ``schema`` (the same one while it holds what it held), None when
    marshal cannot copy it."""
    found = _RECORDS.get(id(schema))
    if found is not None and found.schema is schema and found.held == schema:
        return found
    try:
        held = marshal.loads(marshal.dumps(schema, 2))
    except ValueError:
        return None
    record = Prepared(schema, held)
    if found is None and len(_RECORDS) >= RECORDS_AT_MOST:
        _RECORDS.pop(next(iter(_RECORDS)), None)
    _RECORDS[id(schema)] = record
    return record


def form(schema: Any, key: Hashable, make: Callable[[Any], V]) -> V:
    """``make(schema)``, kept under ``key`` on ``schema``'s record (``key`` names all else
    the form depends on); made each time for a schema with no record."""
    record = prepared(schema)
    if record is None:
        return make(schema)
    forms = record.forms
    if key in forms:
        value: V = forms[key]
        return value
    if len(forms) >= FORMS_AT_MOST:
        forms.clear()
    value = forms[key] = make(schema)
    return value


def own_tools(request: CanonicalRequest) -> CanonicalRequest:
    """``request`` with a copy of each tool's schema, for a stage of the application's that
    sees the canonical request: what it changes in one stays in its call."""
    tools = [
        tool.model_copy(update={"input_schema": copy.deepcopy(tool.input_schema)})
        for tool in request.tools
    ]
    return request.model_copy(update={"tools": tools})


def clear() -> None:
    """Forget every record (tests)."""
    _RECORDS.clear()
