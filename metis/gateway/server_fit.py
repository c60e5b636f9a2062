"""What a routed model takes of the server tools a translated request declares
(metis.gateway.server_tools): the tool whole, without its options, or not at all (left out and
reported, never refused). The model's stack is asked, by encoding a request that declares it
(nothing sent), once per model and declaration: the library's own mapping decides."""

from __future__ import annotations

from typing import Any

from metis.adapter.adapter import Adapter
from metis.core.ids import new_request_id
from metis.errors import CapabilityError
from metis.gateway.inbound import Inbound
from metis.gateway.models import Target
from metis.gateway.server_tools import LABELS, Declared
from metis.model.content import Message
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.pipeline.call import Call, DropRecord
from metis.routing.router import Router
from metis.wire.codec import CANNOT_SERVE

MAX_FITTED = 1024
"""The most (model, declaration) answers kept."""
WIRE_NAMES = {"context_size": "search_context_size"}
"""An option named as the caller's API names it, where that is not the library's name."""
_PROBE_TOOL = ToolDefinition(name="probe", input_schema={"type": "object"})


class ServerTools:
    """What each model's stack takes of each declaration, asked once (a bounded memo)."""

    def __init__(self) -> None:
        self._fitted: dict[tuple[int, str, str, bool], tuple[Declared | None, str]] = {}

    async def fitted(self, inbound: Inbound, target: Target, dropped: list[str]) -> list[Any]:
        """The request's server tools the target takes, as it takes them; each left out (or
        its options) named in ``dropped``."""
        labels = inbound.options.get(LABELS) or []
        beside = bool(inbound.fields.get("tools"))
        kept = []
        for label, tool in zip(labels, inbound.fields.get("server_tools") or [], strict=True):
            router = target.chat_model
            if isinstance(router, Router):
                taken, why = await self._route_taken(router, tool, beside)
            else:
                taken, why = await self._model_taken(target, tool, beside)
            if taken is None:
                dropped.append(f"{label} ({why})")
                continue
            if why:  # taken without some of its options
                left = [
                    WIRE_NAMES.get(n, n) for n in tool.model_fields_set - taken.model_fields_set
                ]
                dropped.append(f"{label} {', '.join(sorted(left))} ({why})")
            kept.append(taken if why else tool)
        return kept

    async def _model_taken(
        self, target: Target, tool: Declared, beside: bool
    ) -> tuple[Declared | None, str]:
        if tool.kind not in target.capabilities.server_tools:
            return None, f"the model runs no {tool.kind.replace('_', ' ')} tool"
        return await self._taken(target, tool, beside)

    async def _route_taken(
        self, router: Router, tool: Declared, beside: bool
    ) -> tuple[Declared | None, str]:
        """``tool`` as a route takes it: as it came when one of its models takes it whole
        (each model takes it or not as the library decides: the router passes over one that
        refuses it), else as the first that takes some of it takes it; not at all when none
        runs it (left out, not refused by every model in turn)."""
        found: list[tuple[Declared | None, str]] = []
        for member in router.targets:
            model = Target(
                member.model, member.adapter, member.model, member.capabilities, member.wire_model
            )
            taken, why = await self._model_taken(model, tool, beside)
            if taken is not None and not why:
                return tool, ""
            found.append((taken, f"{member.model}: {why}"))
        fewer = [(taken, why) for taken, why in found if taken is not None]
        if fewer:
            return fewer[0]
        return None, "no model of the route runs it: " + "; ".join(why for _, why in found)

    async def _taken(
        self, target: Target, tool: Declared, beside: bool
    ) -> tuple[Declared | None, str]:
        """``tool`` as the target takes it: whole (no reason given), without the options it
        refuses, or not at all (None), with the stack's reason when not whole."""
        adapter = target.chat_model
        assert isinstance(adapter, Adapter)
        memo = (id(adapter), target.request_model, tool.model_dump_json(), beside)
        found = self._fitted.get(memo)
        if found is None:
            found = (tool, "")
            why = await _refused(adapter, target, tool, beside)
            if why is not None:
                found = (await _fewer(adapter, target, tool, beside), why)
            if len(self._fitted) < MAX_FITTED:
                self._fitted[memo] = found
        return found


async def _fewer(adapter: Adapter, target: Target, tool: Declared, beside: bool) -> Declared | None:
    """``tool`` without the options the stack refuses (found by leaving them out one at a
    time, then giving back each it takes), or None when it refuses the tool bare too."""
    given = sorted(tool.model_fields_set - {"kind"})
    bare = type(tool)()
    if not given or await _refused(adapter, target, bare, beside) is not None:
        return None
    kept = tool.model_dump(include=set(given))
    for name in given:  # each option alone beside the bare tool: taken or not
        alone = type(tool).model_validate({name: kept[name]})
        if await _refused(adapter, target, alone, beside) is not None:
            del kept[name]
    fewer = type(tool).model_validate(kept)
    return fewer if await _refused(adapter, target, fewer, beside) is None else bare


async def _refused(adapter: Adapter, target: Target, tool: Declared, beside: bool) -> str | None:
    """Why the adapter's stack would refuse a request declaring ``tool`` (beside a function
    tool when ``beside``): its CapabilityError, from encoding it; None when it takes it."""
    provider = adapter.pipeline.provider
    encode = provider.part("encode") if provider is not None else None
    if encode is None:
        return None
    probe = CanonicalRequest(
        model=target.request_model,
        messages=[Message.user(".")],
        max_output_tokens=1,
        server_tools=[tool],
        tools=[_PROBE_TOOL] if beside else [],
    )
    call = Call(
        request_id=new_request_id(),
        provider=adapter.name,
        model=target.request_model,
        wire_model=target.request_model.partition(":")[2],
        drops=DropRecord(secrets=adapter.endpoint.secrets),
    )
    try:
        await adapter.pipeline.prepare(probe, call, through=encode)
    except CapabilityError as refused:
        return refused.message.partition(CANNOT_SERVE)[2] or refused.message
    return None
