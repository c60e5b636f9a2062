"""The one interface every stage implements, built-in or yours.

A call is a request travelling inward through the stack and a stream of items travelling back
out. A stage is an object with a ``name`` whose ``__call__(request, call, inner)`` returns the
items it passes outward; ``inner(request, call)`` runs the rest of the stack, inside it::

    class Shout(Stage[CanonicalRequest, CanonicalRequest, StreamEvent, StreamEvent]):
        name = "shout"

        async def __call__(self, request, call, inner):
            async for event in inner(request, call):
                if isinstance(event, TextDelta):
                    event = replace(event, text=event.text.upper())  # a new event, not a change
                yield event

A stage that needs the adapter's objects (its HTTP client, tool-id store, telemetry sink,
settings) overrides ``bind(services)``, which the adapter calls once when it assembles the
pipeline, and keeps what it uses; the ``call`` each call hands it carries only that call's
identity. Optional ``init(adapter)`` / ``dispose(adapter)`` hooks run when the adapter starts
and stops.

The four type parameters say what the stage takes and gives: the request it accepts, the
request it hands inward, the items it expects from inside and the items it yields outward.
The pipeline reads them when it is assembled and refuses a stack where neighbours disagree.
``Any`` in an item position means "passes items through untouched".

A stage that only rewrites the request subclasses :class:`RequestStage` and implements
``rewrite``; it adds nothing to the per-item path. Options are a pydantic model named
``Options``, validated when the stage is built, so a misspelt option fails at assembly.
"""

from __future__ import annotations

import functools
import typing
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from metis.core.suggest import did_you_mean
from metis.errors import StackError
from metis.pipeline.call import Call
from metis.pipeline.services import StageServices

RequestIn = TypeVar("RequestIn")
RequestOut = TypeVar("RequestOut")
ItemsIn = TypeVar("ItemsIn")
ItemsOut = TypeVar("ItemsOut")

Inner = Callable[[RequestOut, Call], AsyncIterator[ItemsIn]]


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Stage(Generic[RequestIn, RequestOut, ItemsIn, ItemsOut]):
    """One concern of a call (docs/stages.md). Type parameters: the request it takes, the
    request it hands inward, the items it gets from inside, the items it yields outward. The
    pipeline checks neighbours fit when it is assembled."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[BaseModel]] = NoOptions
    terminal: ClassVar[bool] = False
    """A terminal stage (the transport) produces items itself and has nothing inside it."""
    takes_batches: ClassVar[bool] = False
    """A call wrapper that hands on what its inner stream gives without looking at it
    (``retry``) may set this: it is then given the send loop's batches (a list of the events
    of one chunk) as they are. Any other wrapper is given one event at a time."""
    dialect_option: ClassVar[str | None] = None
    """The option naming the wire dialect (``codec`` for encode and normalize, ``rules`` for
    pre_send_check), which a stack's top-level ``codec:`` sets once for every such stage."""
    role: ClassVar[str | None] = None
    """The part of the provider this stage is (``encode``, ``edit``, ``auth``, ``reader``,
    ``framing``, ``transport``, ``lifespan``; metis.pipeline.provider), None for a policy."""
    zone: ClassVar[str | None] = None
    """Where the skeleton places a stage of this class (``policy``, ``wire edit``, ``auth
    step``; metis.pipeline.skeleton); None: where it is listed."""

    @classmethod
    def dialect(cls, options: dict[str, Any]) -> str | None:
        """The wire dialect these options name (checked against the stack's other stages)."""
        value = options.get(cls.dialect_option) if cls.dialect_option else None
        return value if isinstance(value, str) else None

    def __init__(self, **options: Any) -> None:
        if not options and _defaults_only(self.Options):
            self.options = self.Options.model_construct()  # its validator is built on first use
            return
        try:
            self.options = self.Options(**options)
        except ValidationError as exc:
            raise StackError(_explain_options(self, exc)) from None

    def __call__(
        self, request: RequestIn, call: Call, inner: Inner[RequestOut, ItemsIn]
    ) -> AsyncIterator[ItemsOut]:
        raise NotImplementedError(f"stage {self.name!r} does not implement __call__")

    def __repr__(self) -> str:
        shown = self.options.model_dump(exclude_defaults=True)
        return f"<stage {self.name}{' ' + repr(shown) if shown else ''}>"

    def bind(self, services: StageServices) -> None:
        """Receive the adapter's objects, once, when the adapter assembles its pipeline (and
        when the stage is inserted into an adapter's pipeline later). Keep what the stage
        uses; most stages use nothing and leave this alone."""

    async def init(self, adapter: Any) -> None:
        """Kept for stages written for the first engine: ``adapter.init()`` calls it on every
        stage, in order, with the adapter. A setup of the provider's belongs in its lifespan
        (docs/engine.md), which takes services, not the adapter."""

    async def dispose(self, adapter: Any) -> None:
        """Kept likewise: ``adapter.aclose()`` calls it on every stage, innermost first."""

    @classmethod
    def signature(cls) -> StageSignature:
        """What the stage takes and gives, read from its type parameters (the pipeline
        checks each stage's against its neighbours')."""
        return _signature_of(cls)


class Transform(Stage[RequestIn, RequestOut, Any, Any]):
    """A request transform: it rewrites the request on its way in, once per call, and leaves
    the items alone (it costs nothing per item). ``encode`` is one: canonical in, wire out."""

    def rewrite(self, request: RequestIn, call: Call) -> RequestOut:
        """The request as the next stage inward is to see it."""
        raise NotImplementedError(f"stage {self.name!r} does not implement rewrite")

    def __call__(self, request: RequestIn, call: Call, inner: Inner[RequestOut, Any]) -> Any:
        return inner(self.rewrite(request, call), call)


class RequestStage(Transform[RequestIn, RequestIn]):
    """A stage that rewrites the request and leaves the items alone."""


class AsyncRequestStage(Stage[RequestIn, RequestIn, Any, Any]):
    """A request transform that awaits (an auth step fetching a token, a region lookup)."""

    async def rewrite(self, request: RequestIn, call: Call) -> RequestIn:
        """The request as the next stage inward is to see it, awaited."""
        raise NotImplementedError(f"stage {self.name!r} does not implement rewrite")

    def __call__(self, request: RequestIn, call: Call, inner: Inner[RequestIn, Any]) -> Any:
        return _rewritten_then(self.rewrite, request, call, inner)


async def _rewritten_then(
    rewrite: Callable[[Any, Call], Any], request: Any, call: Call, inner: Inner[Any, Any]
) -> AsyncIterator[Any]:
    async for item in inner(await rewrite(request, call), call):
        yield item


class StageSignature(typing.NamedTuple):
    request_in: Any
    request_out: Any
    items_in: Any
    items_out: Any


def _signature_of(cls: type) -> StageSignature:
    """Resolve ``Stage[...]``'s four parameters for ``cls`` through its generic bases, once
    per class (its bases never change; every pipeline built checks every stage's)."""
    found = _SIGNATURES.get(cls)
    if found is None:
        params = _resolve(cls, {})
        found = _SIGNATURES[cls] = StageSignature(*(params or (Any, Any, Any, Any)))
    return found


_SIGNATURES: weakref.WeakKeyDictionary[type, StageSignature] = weakref.WeakKeyDictionary()


def _resolve(cls: type, bindings: dict[Any, Any]) -> tuple[Any, ...] | None:
    for base in getattr(cls, "__orig_bases__", ()):
        origin = typing.get_origin(base) or base
        args = tuple(bindings.get(a, a) for a in typing.get_args(base))
        if origin is Stage:
            return tuple(Any if isinstance(a, TypeVar) else a for a in args) or None
        if isinstance(origin, type) and issubclass(origin, Stage):
            own = getattr(origin, "__parameters__", ())
            found = _resolve(origin, dict(zip(own, args, strict=False)))
            if found is not None:
                return found
    return None


@functools.cache
def _defaults_only(options: type[BaseModel]) -> bool:
    """Whether ``options()`` is valid with nothing checked: no field is required, none
    validates its default and no model validator checks the whole. A stage given no options
    then takes the defaults without building the model's validator (``defer_build``)."""
    if options.model_config.get("validate_default"):
        return False
    if options.__pydantic_decorators__.model_validators:
        return False
    return not any(f.is_required() or f.validate_default for f in options.model_fields.values())


def _explain_options(stage: Stage[Any, Any, Any, Any], exc: ValidationError) -> str:
    known = ", ".join(stage.Options.model_fields) or "none"
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "options"
        if err["type"] == "extra_forbidden":
            problems.append(
                f"unknown option {where!r}{did_you_mean(where, stage.Options.model_fields)}"
            )
        else:
            problems.append(f"option {where!r}: {err['msg']}")
    return f"stage {stage.name!r}: {'; '.join(problems)} (its options: {known})"
