"""A stream's body that has run to its end is not closed again under a shielded scope: its
ending ran as it ended (metis/gateway/begun.py ``finished``), so the scope would be made for
nothing at every stream's end (issue 25 item 11). One cut short is still closed, shielded."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import pytest

from metis.gateway import service
from metis.gateway.begun import Begun, begun, finished

pytestmark = pytest.mark.anyio


async def _body(ended: list[str]) -> AsyncGenerator[bytes, None]:
    try:
        yield b"a"
        yield b"b"
    finally:
        ended.append("ending")


SCOPE = anyio.CancelScope


class _Counted:
    """anyio.CancelScope, counted."""

    made: list[dict[str, Any]] = []

    def __init__(self, **options: Any) -> None:
        self.made.append(options)
        self._scope = SCOPE(**options)

    def __enter__(self) -> Any:
        return self._scope.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._scope.__exit__(*exc)


async def test_a_body_is_finished_once_run_to_its_end_or_closed() -> None:
    ended: list[str] = []
    body = _body(ended)
    assert not finished(body)  # not begun
    chunks = await begun(body)
    assert isinstance(chunks, Begun) and not finished(chunks)
    assert [chunk async for chunk in chunks] == [b"a", b"b"]
    assert finished(chunks) and finished(body) and ended == ["ending"]
    cut = _body(ended)
    await anext(cut)
    await cut.aclose()
    assert finished(cut) and ended == ["ending", "ending"]

    class Plain(AsyncIterator[bytes]):
        async def __anext__(self) -> bytes:
            raise StopAsyncIteration

    assert not finished(Plain())  # nothing says it ended: closed as before


async def test_only_a_body_cut_short_is_closed_under_a_shielded_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(anyio, "CancelScope", _Counted)
    _Counted.made.clear()
    ended: list[str] = []
    whole = _body(ended)
    assert [chunk async for chunk in whole] == [b"a", b"b"]
    await service.aclose_shielded(whole)
    assert _Counted.made == []
    cut = _body(ended)
    await anext(cut)
    await service.aclose_shielded(cut)
    assert _Counted.made == [{"shield": True}]
    assert ended == ["ending", "ending"]
