"""The provider: the wire half of one adapter, assembled once from its stack (docs/engine.md).

Its parts are the stack's provider stages, found by their ``role``, never by their names:

- ``encode`` (``encode``): the codec, canonical request -> wire body;
- ``edit`` (``thinking_turn``, ``cache_control``, ``strict_schema``, ``include_usage``,
  ``wire_fields``, ``continuation``, ``pre_send_check``): the wire edits, in order;
- ``auth`` (``url_params``, ``aws_endpoint``, ``aws_sigv4``, ``google_auth``,
  ``azure_auth``): the auth flow, each attempt addressed and signed;
- ``reader`` (``normalize``): objects -> canonical events, by the codec;
- ``framing`` (``decode``): body bytes -> objects;
- ``transport`` (``transport``): the exchange on the adapter's one HTTP session;
- ``lifespan`` (``ollama_lifecycle``): a local server's setup and teardown.

Besides the calls the pipeline runs, the provider sends what is not a conversation through
the same path (:meth:`Provider.fetch`): the auth flow, the transport's exchange with its
deadlines, redirect policy and socket guard, one JSON body read under the JSON limits (and,
as every reply read whole, at most :data:`~metis.wire.framing.objects.MAX_WHOLE_BODY`), an
error answer classified by the codec, every secret hidden from what is raised.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from metis.errors import AdapterError, AuthError, ProtocolError, StackError, scrub_error
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.call import Call
from metis.pipeline.request import HTTPFailure, WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Stage
from metis.wire.compressed import undeclared_compression
from metis.wire.framing.json_object import parse_object
from metis.wire.framing.objects import MAX_WHOLE_BODY

AnyStage = Stage[Any, Any, Any, Any]
ROLES = ("encode", "edit", "auth", "reader", "framing", "transport", "lifespan")


ErrorMapper = Callable[[int, Mapping[str, str], bytes], AdapterError]
"""What classifies an error answer: its status, headers and body -> the error."""


class Authenticates(Protocol):
    name: str

    async def rewrite(self, request: WireRequest, call: Call) -> WireRequest: ...


@dataclass(frozen=True, slots=True)
class Fetched:
    """A whole answer from :meth:`Provider.fetch`: its status, headers and JSON object."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass(slots=True, eq=False)
class Provider:
    """The parts of one adapter's wire half, in stack order, and the ways to send."""

    name: str
    parts: dict[str, list[AnyStage]]
    services: StageServices = field(default_factory=StageServices)

    @classmethod
    def of(cls, stages: Sequence[AnyStage], services: StageServices | None) -> Provider | None:
        """The provider in ``stages``, or None for a pipeline with no transport of ours."""
        parts: dict[str, list[AnyStage]] = {role: [] for role in ROLES}
        for stage in stages:
            role = getattr(stage, "role", None)
            if role in parts:
                parts[role].append(stage)
        if not parts["transport"]:
            return None
        services = services or StageServices()
        provider = cls(services.provider, parts, services)
        provider.share_codec()
        _fresh_wire_for_own_stages(stages, provider.part("encode"))
        return provider

    def share_codec(self) -> None:
        """Hand the codec ``encode`` built to every part that reads or edits through one."""
        encode = self.part("encode")
        codec = getattr(encode, "codec", None)
        if codec is None:
            return
        for role in ("edit", "reader"):
            for stage in self.parts[role]:
                use_codec = getattr(stage, "use_codec", None)
                if use_codec is not None:
                    use_codec(codec)

    def part(self, role: str) -> AnyStage | None:
        found = self.parts.get(role)
        return found[0] if found else None

    @property
    def codec(self) -> Any:
        """The adapter's one codec instance."""
        encode = self.part("encode")
        codec = getattr(encode, "codec", None)
        if codec is None:
            raise StackError(f"{self.name}: the stack has no codec (no encode stage)")
        return codec

    @property
    def codec_name(self) -> str | None:
        """The name the codec is registered by (``schema`` for the schema-driven one)."""
        name = getattr(getattr(self.part("encode"), "options", None), "codec", None)
        return name if isinstance(name, str) else None

    def describe(self) -> list[tuple[str, str]]:
        """(role, stage name) of every part, in stack order."""
        return [(role, stage.name) for role in ROLES for stage in self.parts[role]]

    def lifespan(
        self, declared: AdapterCapabilities
    ) -> AbstractAsyncContextManager[AdapterCapabilities] | None:
        """The lifespan part's context (None when the stack has none): entered by
        ``adapter.init()``, left by ``adapter.dispose()``; it yields the capabilities as it
        found them (``declared`` when it found nothing to change)."""
        make = getattr(self.part("lifespan"), "lifespan", None)
        return make(self, declared) if make is not None else None

    async def authenticate(self, request: WireRequest, call: Call) -> WireRequest:
        """``request`` through the auth flow, as every attempt of a call goes."""
        for step in self.parts["auth"]:
            rewritten = _auth(step)(request, call)
            request = await rewritten if inspect.isawaitable(rewritten) else rewritten
        return request

    def refused(self, request: WireRequest, error: AdapterError | None = None) -> None:
        """``request`` (as the auth flow made it) was answered 401: each auth step that keeps
        a token (its ``refused``) does not send that one again, and one that can ask for a
        token with the claims the answer asked for (its ``challenged``) does next time."""
        claims = isinstance(error, AuthError) and error.claims is not None
        for step in self.parts["auth"]:
            refused = getattr(step, "refused", None)
            if refused is not None:
                refused(request)
            challenged = getattr(step, "challenged", None)
            if claims and challenged is not None:
                challenged(error)

    async def fetch(
        self, request: WireRequest, call: Call, errors: ErrorMapper | None = None
    ) -> Fetched:
        """Send ``request`` the way every request to this provider goes, and read its answer
        whole: a JSON object, or a classified AdapterError with every secret hidden. An error
        answer is classified by ``errors`` when given (an embedding codec's), else by the
        stack's codec."""
        status, headers, raw = await self.fetch_bytes(request, call, errors)
        try:
            return Fetched(status, headers, _json_object(raw, call))
        except AdapterError as error:
            raise _classified(error, call, self.services.secrets)  # noqa: B904 - as it came

    async def fetch_bytes(
        self,
        request: WireRequest,
        call: Call,
        errors: ErrorMapper | None = None,
        max_bytes: int = MAX_WHOLE_BODY,
    ) -> tuple[int, dict[str, str], bytes]:
        """:meth:`fetch`, the answer's body as bytes (a JSONL file, a download); a body over
        ``max_bytes`` is a ProtocolError, read no further."""
        transport = self.part("transport")
        open_ = getattr(transport, "open", None)
        if open_ is None:
            raise StackError(f"{self.name}: the transport is not one the provider can send on")
        secrets = self.services.secrets
        try:
            request = await self.authenticate(request.serialized(), call)
            exchange = await open_(request, call)
            try:
                raw = await exchange.body(max_bytes)
            except Exception as exc:
                translated = exchange.translate(exc)
                if translated is exc:  # raised as it is: its own cause would be a loop
                    raise
                raise translated from exc
            finally:
                await exchange.aclose()
            return exchange.status, dict(exchange.headers), raw
        except HTTPFailure as failure:
            classify = errors or self.codec.error_from_http
            error = classify(failure.status, failure.headers, failure.body)
            if failure.status == 401:
                self.refused(request, error)
            raise _classified(error, call, secrets) from None
        except AdapterError as error:
            raise _classified(error, call, secrets)  # noqa: B904 - as it came, cause kept


def _auth(step: AnyStage) -> Callable[[WireRequest, Call], Any]:
    rewrite = getattr(step, "rewrite", None)
    if rewrite is None:
        raise StackError(f"auth step {step.name!r} has no rewrite(request, call)")
    return rewrite  # type: ignore[no-any-return]


def _json_object(raw: bytes, call: Call) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        said = undeclared_compression(raw) or f"invalid UTF-8 ({exc.reason} at byte {exc.start})"
        raise ProtocolError(
            f"{call.provider} answered with {said}",
            provider=call.provider,
        ) from None
    return parse_object(text, "json")


def _classified(error: AdapterError, call: Call, secrets: tuple[str, ...]) -> AdapterError:
    error.provider = error.provider or call.provider
    error.request_id = error.request_id or call.request_id
    scrub_error(error, (*secrets, *call.secrets))  # and what the auth flow fetched
    return error


def _fresh_wire_for_own_stages(stages: Sequence[AnyStage], encode: AnyStage | None) -> None:
    """An application's stage after ``encode`` sees the wire body: the codec makes that body
    anew for each call, so what the stage changes in it stays in its call."""
    if encode is None or not hasattr(encode, "fresh_wire"):
        return
    after = stages[list(stages).index(encode) + 1 :] if encode in stages else []
    encode.fresh_wire = any(not type(stage).__module__.startswith("metis.") for stage in after)
