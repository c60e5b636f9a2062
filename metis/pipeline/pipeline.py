"""A pipeline: an ordered stack of stages, outermost first, checked when assembled."""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from metis.errors import StackError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.model.schema_forms import own_tools
from metis.pipeline.call import Call
from metis.pipeline.hooks import Runner, Start, flattened, run_segment, yields_batches
from metis.pipeline.provider import Provider
from metis.pipeline.segments import compile_call, prepare, segment
from metis.pipeline.send import provider_tail
from metis.pipeline.services import StageServices
from metis.pipeline.skeleton import ZONE_NAMES, ZONES, check_order
from metis.pipeline.stage import Stage

AnyStage = Stage[Any, Any, Any, Any]


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
        self._provider: Provider | None = None
        self._services: StageServices | None = None
        self._install(tuple(stages))

    def bound(self, services: StageServices) -> Pipeline:
        """A copy of this pipeline for one adapter: each stage copied and given ``services``
        (:meth:`Stage.bind`). Stages inserted into the copy later are bound as they arrive."""
        pipeline = Pipeline([copy.copy(s) for s in self._stages], self.name, takes=self.takes)
        pipeline._services = services
        for stage in pipeline._stages:
            stage.bind(services)
        pipeline._assemble()
        return pipeline

    def rebind(self, services: StageServices) -> None:
        """Give this pipeline's own stages new ``services`` (its adapter's changed)."""
        self._services = services
        for stage in self._stages:
            stage.bind(services)
        self._assemble()

    @property
    def services(self) -> StageServices | None:
        """What this pipeline's stages were bound with (None until an adapter binds it)."""
        return self._services

    @property
    def stages(self) -> tuple[AnyStage, ...]:
        """The stages, outermost first (the order a request goes down them)."""
        return self._stages

    def names(self) -> list[str]:
        """The stages' names, outermost first."""
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
        """Put ``stage`` just outside the stage named ``name``; the pipeline checks the
        neighbours' types (a ``StackError`` naming the stage when they do not fit)."""
        i = self._index(name)
        return self._install((*self._stages[:i], stage, *self._stages[i:]))

    def insert_after(self, name: str, stage: AnyStage) -> Pipeline:
        """Put ``stage`` just inside the stage named ``name`` (the request reaches it next),
        checked as :meth:`insert_before`."""
        i = self._index(name) + 1
        return self._install((*self._stages[:i], stage, *self._stages[i:]))

    def replace(self, name: str, stage: AnyStage) -> Pipeline:
        """Put ``stage`` where the stage named ``name`` is, checked as :meth:`insert_before`."""
        i = self._index(name)
        return self._install((*self._stages[:i], stage, *self._stages[i + 1 :]))

    def remove(self, name: str) -> Pipeline:
        """Take the stage named ``name`` out, checked as :meth:`insert_before`."""
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
            runner = self._runner
            if yields_batches(runner):  # the outermost segment has no frame: one at a time
                runner = flattened(runner)
            yield runner(request, call, opened)
        finally:
            with anyio.CancelScope(shield=True):  # close even when the caller was cancelled
                for iterator in opened:
                    aclose = getattr(iterator, "aclose", None)
                    if aclose is not None:
                        await aclose()

    def stream(self, request: Any, start: Start) -> AsyncGenerator[Any, None]:
        """One call's events as one generator: ``start(request)`` opens the call (its request,
        its :class:`Call`, and the watch of whoever asks, outermost of all), the outermost
        segment's hooks run in the same frame, and closing the generator closes every stage's
        iterator, whether the caller finished, broke out, failed or was cancelled."""
        steps, inside = self._outer
        return run_segment(steps, inside, request, None, [], start)

    async def prepare(self, request: Any, call: Call, through: AnyStage) -> Any:
        """``request`` as the stages up to ``through`` (included) hand it inward, nothing
        sent (:func:`metis.pipeline.segments.prepare`); the tools' schemas the request's own
        when a stage of the application's sees it (:attr:`own_sees_request`), as in a call."""
        if isinstance(request, CanonicalRequest) and request.tools and self.own_sees_request:
            request = own_tools(request)
        stages = self._stages
        return await prepare(stages[: stages.index(through) + 1], request, call)

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
        self._outer = compile_call(stages, provider_tail)
        self._runner = segment(*self._outer)
        self._assemble()
        return self

    def _assemble(self) -> None:
        self._provider = Provider.of(self._stages, self._services)

    @property
    def own_sees_request(self) -> bool:
        """Whether a stage of the application's comes before ``encode``: each call is then
        given its own copy of its tools' schemas (metis/model/schema_forms.py ``own_tools``)."""
        return self._provider is not None and self._provider.own_sees_request

    @property
    def provider(self) -> Provider | None:
        """The wire half of this pipeline, assembled from its provider stages (None for a
        pipeline without a transport of the provider's): its parts share one codec."""
        return self._provider


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

    check_order([s.name for s in stages], _zone_finder(stages), f"pipeline {name!r}")
    _check_types(stages, name, takes)


def _check_types(stages: tuple[AnyStage, ...], name: str, takes: Any) -> None:
    """Each stage takes what the one outside it hands inward, and expects what the one
    inside it yields; the stack yields canonical events."""
    *outer, innermost = stages
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


def _zone_finder(stages: tuple[AnyStage, ...]) -> Callable[[str], int | None]:
    by_name = {stage.name: stage for stage in stages}

    def zone_of(name: str) -> int | None:
        declared = getattr(by_name.get(name), "zone", None)
        if declared in ZONE_NAMES:
            return ZONE_NAMES.index(declared)
        return ZONES.get(name)

    return zone_of


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
