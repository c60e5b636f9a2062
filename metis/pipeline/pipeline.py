"""A pipeline: an ordered stack of stages, outermost first, checked when assembled."""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from metis.errors import StackError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Stage

AnyStage = Stage[Any, Any, Any, Any]
Runner = Callable[[Any, Call, list[AsyncIterator[Any]]], AsyncIterator[Any]]


class Pipeline:
    """Stages in call order: the first sees the canonical request first and the canonical
    events last. Editing methods validate the new stack before it replaces the old one, so a
    pipeline is never left half-edited, and calls already running keep the stack they began
    with."""

    def __init__(
        self, stages: Iterable[AnyStage], name: str = "custom", *, takes: Any = CanonicalRequest
    ) -> None:
        self.name = name
        self.takes = takes
        """What the outermost stage is handed (a canonical request, for a provider's stack)."""
        self._stages: tuple[AnyStage, ...] = ()
        self._runner: Runner | None = None
        self._services: StageServices | None = None
        self._install(tuple(stages))

    def bound(self, services: StageServices) -> Pipeline:
        """A copy of this pipeline for one adapter: each stage copied and given ``services``
        (:meth:`Stage.bind`). Stages inserted into the copy later are bound as they arrive."""
        pipeline = Pipeline([copy.copy(s) for s in self._stages], self.name, takes=self.takes)
        pipeline._services = services
        for stage in pipeline._stages:
            stage.bind(services)
        return pipeline

    def rebind(self, services: StageServices) -> None:
        """Give this pipeline's own stages new ``services`` (its adapter's changed)."""
        self._services = services
        for stage in self._stages:
            stage.bind(services)

    @property
    def services(self) -> StageServices | None:
        """What this pipeline's stages were bound with (None until an adapter binds it)."""
        return self._services

    @property
    def stages(self) -> tuple[AnyStage, ...]:
        return self._stages

    def names(self) -> list[str]:
        return [s.name for s in self._stages]

    def __iter__(self) -> Iterator[AnyStage]:
        return iter(self._stages)

    def __len__(self) -> int:
        return len(self._stages)

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self._stages)

    def __getitem__(self, name: str) -> AnyStage:
        return self._stages[self._index(name)]

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}: {' -> '.join(self.names())})"

    # Editing ---------------------------------------------------------------------------

    def insert_before(self, name: str, stage: AnyStage) -> Pipeline:
        i = self._index(name)
        return self._install((*self._stages[:i], stage, *self._stages[i:]))

    def insert_after(self, name: str, stage: AnyStage) -> Pipeline:
        i = self._index(name) + 1
        return self._install((*self._stages[:i], stage, *self._stages[i:]))

    def replace(self, name: str, stage: AnyStage) -> Pipeline:
        i = self._index(name)
        return self._install((*self._stages[:i], stage, *self._stages[i + 1 :]))

    def remove(self, name: str) -> Pipeline:
        i = self._index(name)
        return self._install(self._stages[:i] + self._stages[i + 1 :])

    def copy(self) -> Pipeline:
        """The same stages (shared, not copied) in a pipeline of its own, not bound."""
        return Pipeline(self._stages, self.name, takes=self.takes)

    # Running ---------------------------------------------------------------------------

    @asynccontextmanager
    async def run(self, request: Any, call: Call) -> AsyncIterator[AsyncIterator[Any]]:
        """Open the stack for one call and give back its outward stream of events.

        Leaving the block closes every stage's iterator, outermost first, so the transport's
        connection is released the moment the caller stops, whether by finishing, breaking
        out, an exception or cancellation; no stage has to remember to do it.
        """
        opened: list[AsyncIterator[Any]] = []
        assert self._runner is not None
        try:
            yield self._runner(request, call, opened)
        finally:
            with anyio.CancelScope(shield=True):  # close even when the caller was cancelled
                for iterator in opened:
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        await aclose()

    # Assembly --------------------------------------------------------------------------

    def _index(self, name: str) -> int:
        for i, stage in enumerate(self._stages):
            if stage.name == name:
                return i
        raise StackError(
            f"pipeline {self.name!r} has no stage {name!r}; its stages are: "
            + ", ".join(self.names())
        )

    def _install(self, stages: tuple[AnyStage, ...]) -> Pipeline:
        validate(stages, self.name, self.takes)
        if self._services is not None:
            for stage in stages:
                if stage not in self._stages:
                    stage.bind(self._services)
        self._stages = stages
        self._runner = _compile(stages)
        return self


def _compile(stages: tuple[AnyStage, ...]) -> Runner:
    runner: Runner | None = None
    for stage in reversed(stages):
        runner = _bind(stage, runner)
    assert runner is not None
    return runner


def _bind(stage: AnyStage, inside: Runner | None) -> Runner:
    def run(request: Any, call: Call, opened: list[AsyncIterator[Any]]) -> AsyncIterator[Any]:
        if inside is None:
            iterator = stage(request, call, _nothing_inside)
        else:

            def inner(inner_request: Any, inner_call: Call) -> AsyncIterator[Any]:
                return inside(inner_request, inner_call, opened)

            iterator = stage(request, call, inner)
        if not opened or opened[-1] is not iterator:  # a RequestStage hands back inner's own
            opened.append(iterator)
        return iterator

    return run


def _nothing_inside(request: Any, call: Call) -> AsyncIterator[Any]:
    raise StackError("a terminal stage tried to call a stage inside it")


# Validation ----------------------------------------------------------------------------


def validate(
    stages: tuple[AnyStage, ...], name: str = "custom", takes: Any = CanonicalRequest
) -> None:
    """Check that neighbouring stages fit; raise StackError naming the stage and the reason."""
    if not stages:
        raise StackError(f"pipeline {name!r} has no stages")
    for stage in stages:
        if not isinstance(stage, Stage):
            raise StackError(f"pipeline {name!r}: {stage!r} is not a Stage")
        if not stage.name:
            raise StackError(f"pipeline {name!r}: {type(stage).__name__} has no name")
    seen: set[str] = set()
    for stage in stages:
        if stage.name in seen:
            raise StackError(f"pipeline {name!r}: two stages are named {stage.name!r}")
        seen.add(stage.name)
    *outer, innermost = stages
    if not innermost.terminal:
        raise StackError(
            f"pipeline {name!r} has no transport: its innermost stage {innermost.name!r} "
            "passes the request inward but nothing is inside it (end the stack with a "
            "terminal stage such as 'transport')"
        )
    for stage in outer:
        if stage.terminal:
            raise StackError(
                f"pipeline {name!r}: stage {stage.name!r} is terminal (it answers requests "
                "itself) but has stages inside it: "
                + ", ".join(s.name for s in stages[stages.index(stage) + 1 :])
            )

    request_type: Any = takes
    for stage in stages:
        sig = stage.signature()
        if not _fits(sig.request_in, request_type):
            raise StackError(
                f"pipeline {name!r}: stage {stage.name!r} takes {_show(sig.request_in)} but "
                f"the stage outside it hands over {_show(request_type)}"
            )
        if sig.request_out is not Any:
            request_type = sig.request_out

    item_type: Any = innermost.signature().items_out
    producer = innermost.name
    for stage in reversed(outer):
        sig = stage.signature()
        if sig.items_in is Any and sig.items_out is Any:
            continue
        if not _fits(sig.items_in, item_type):
            raise StackError(
                f"pipeline {name!r}: stage {stage.name!r} expects {_show(sig.items_in)} from "
                f"inside it, but {producer!r} yields {_show(item_type)}"
            )
        item_type, producer = sig.items_out, stage.name
    if not _fits(StreamEvent, item_type):
        raise StackError(
            f"pipeline {name!r} yields {_show(item_type)} (from {producer!r}) where canonical "
            "stream events are needed: is a 'normalize' stage missing?"
        )


def _fits(expected: Any, produced: Any) -> bool:
    if expected is Any or produced is Any:
        return True
    wanted = _members(expected)
    return all(any(issubclass(p, w) for w in wanted) for p in _members(produced))


def _members(t: Any) -> tuple[type, ...]:
    origin = typing.get_origin(t)
    if origin is typing.Union or origin is types.UnionType:
        return tuple(m for a in typing.get_args(t) for m in _members(a))
    return (origin or t,)


def _show(t: Any) -> str:
    return getattr(t, "__name__", None) or repr(t)
