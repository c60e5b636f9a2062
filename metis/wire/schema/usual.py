"""The usual streamed chunk of a schema-driven stream, recognised and read in one step.

Most chunks of a stream in ``blocks`` mode are alike: one item in the envelope's list
(``candidates``: one candidate), holding one content part that is its text alone, more of the
text block already open, with the usage the provider repeats in every chunk, and nothing else
the parser would act on: no error, no finish reason, no field reported as dropped, no
grounding. :class:`UsualChunk` says, from the keys present, whether a chunk is one, and gives
its text; the parser then adds it to the open block and keeps the usage, which is all the
long way (:meth:`metis.wire.schema.parse.SchemaParser.feed`) would do with it. A chunk with
any of those keys present (even null), any other shape, or a value of another type, is read
the long way, which says what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from metis.wire.schema.compiled import Reading
from metis.wire.schema.paths import Path, compile_path


class UsualChunk:
    """The shape of the usual chunk of one stream schema (see the module's docstring)."""

    __slots__ = ("_content", "_index", "_list", "_other", "_parts", "_scoped", "_text", "usage")

    def __init__(
        self,
        list_key: str,
        content: tuple[str, str],
        text_key: str,
        usage_key: str,
        top_keys: frozenset[str],
        envelope_keys: frozenset[str],
        by_index: bool,
    ) -> None:
        self._list = list_key
        self._content, self._parts = content
        self._text = text_key
        self.usage = usage_key
        """The key of the chunk's usage object."""
        self._other = top_keys  # keys of the chunk that send it the long way
        self._scoped = envelope_keys  # and of its list's item
        self._index = by_index  # the item read is chosen by its ``index`` (Gemini's)

    @classmethod
    def of(
        cls,
        reading: Reading,
        lone_text_key: str | None,
        error_path: Path,
        extra_keys: Iterable[str] | None,
    ) -> UsualChunk | None:
        """The usual chunk of ``reading``, if its shape has one: its text part read alone
        (``lone_text_key``), its paths keys under one list item, its error one key at the top
        (``error_path``). ``extra_keys``: a dialect's keys of the item that it reads itself
        (Gemini's grounding), and whose item is chosen by its index; None for no dialect."""
        envelope = reading.envelope_path
        inside, content = reading.relative(reading.content_path)
        usage = compile_path(reading.schema.usage_path)
        if (
            lone_text_key is None
            or reading.separate
            or envelope is None
            or envelope[1] != 0
            or not inside
            or len(content) != 2
            or len(usage) != 1
            or len(error_path) != 1
            or not all(step.__class__ is str for step in (*content, *usage, *error_path))
            or (reading.dropped and reading.dropped_keys is None)
        ):
            return None
        top = {str(error_path[0])}
        scoped = set(reading.dropped_keys or ())
        for source in reading.finish_sources:
            is_scoped, path = reading.relative(source.path)
            if is_scoped:
                if len(path) != 1:
                    return None
                scoped.add(str(path[0]))
            elif path[0] == envelope[0]:
                return None
            else:
                top.add(str(path[0]))
        scoped.update(extra_keys or ())
        return cls(
            str(envelope[0]),
            (str(content[0]), str(content[1])),
            lone_text_key,
            str(usage[0]),
            frozenset(top),
            frozenset(scoped),
            extra_keys is not None,
        )

    def text(self, obj: dict[str, Any], index: int | None) -> str | None:
        """The text of ``obj`` when it is the usual chunk, else None. ``index``: the index of
        the item read (for a dialect that chooses it by index), None before one is known."""
        if not self._other.isdisjoint(obj):  # (a set's test of a dict: its keys, no view made)
            return None
        try:  # one item, one part: unpacked, so anything else raises here (or is no dict)
            (item,) = obj[self._list]
            if item.__class__ is not dict or not self._scoped.isdisjoint(item):
                return None
            if self._index:
                given = item.get("index", 0)
                if index is None or index != (given if given.__class__ is int else 0):
                    return None
            (part,) = item[self._content][self._parts]
            if part.__class__ is not dict or len(part) != 1:
                return None
            text = part[self._text]
        except (KeyError, TypeError, ValueError):  # a key missing, a value of another type
            return None
        return text if text.__class__ is str and text else None
