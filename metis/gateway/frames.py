"""A request's frame: all it asks beside its turns (the model, the tools, the settings, the
fields left out), read once per content, and per model it is sent to, what the gateway makes
of it (its projection, and the canonical request's fields validated once).

A client sends the same frame with every request (an agent's tools and settings, turn after
turn; a benchmark's every request): only its turns differ. Its frame is read the first time;
a later request with the same frame (the same JSON, exact types: ``1`` is not ``1.0``) is
given a copy: its own output schema and lists, the same tools (whose schemas no step changes
in place: what is derived from each is made once, metis/model/schema_forms.py) and the same
immutable values. What the frame holds is checked as it is read; what it cannot keep (a server tool,
which is fitted per request) is read each time. The turns are read for every request before
the frame (a request with a bad turn and a bad setting is refused for the turn, as before).
"""

from __future__ import annotations

import marshal
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from metis.core.ids import new_request_id
from metis.gateway.projection import project
from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest

if TYPE_CHECKING:
    from metis.gateway.inbound import Inbound
    from metis.gateway.models import Target

TURNS = ("messages", "system")
"""The body's fields that are not its frame (read per request)."""
FRESH = ("tools", "output_schema", "stop_sequences")
"""The frame's fields each request is given its own copy of: its own lists, and its own output
schema; the tools themselves are shared (their schemas no step changes in place, so what is
derived from them is made once: metis/model/schema_forms.py)."""
MUTABLE = (*FRESH, "server_tools", "provider_options", "extra_headers", "extra_query")
"""The canonical request's fields that may be edited in place: each request's own."""
FRAMES_AT_MOST = 256
PLANS_AT_MOST = 8
"""Frames kept, and per frame the models (and capabilities) it is planned for."""


@dataclass(slots=True, eq=False)
class Frame:
    """What a body asks beside its turns, as read: the canonical fields, the fields it left
    out, whether it streams, its output limit and the reply's options (metis.gateway.inbound
    ``Inbound``). ``kept``: whether it may be given again (not when it names a server tool,
    fitted per request)."""

    fields: dict[str, Any]
    ignored: list[str]
    stream: bool
    max_output_tokens: int | None
    options: dict[str, Any] = field(default_factory=dict)
    kept: bool = True
    blobs: dict[str, Any] = field(default_factory=dict)
    plans: OrderedDict[tuple[Any, ...], Plan] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        if not self.kept:
            return
        schema = self.fields.get("output_schema")
        try:  # (a client's body is parsed JSON: marshal writes every part)
            if schema is not None:
                self.blobs["output_schema"] = marshal.dumps(schema, 2)
        except ValueError:
            self.kept = False

    def given(self) -> dict[str, Any]:
        """The canonical fields: a request's own lists and output schema, the same tools."""
        if not self.kept:
            return self.fields
        fields = dict(self.fields)
        if "tools" in fields:  # the very tools (metis/gateway/inbound.py tool_definition)
            fields["tools"] = list(fields["tools"])
        if "output_schema" in self.blobs:
            fields["output_schema"] = marshal.loads(self.blobs["output_schema"])
        if "stop_sequences" in fields:
            fields["stop_sequences"] = list(fields["stop_sequences"])
        return fields


@dataclass(slots=True, eq=False)
class Plan:
    """A frame sent to one model with given capabilities: the canonical request's fields
    (validated once, no turns), and what the projection left out."""

    capabilities: AdapterCapabilities
    template: CanonicalRequest
    changes: dict[str, Any]
    dropped: list[str]


_FRAMES: OrderedDict[bytes, Frame] = OrderedDict()


def framed(body: Mapping[str, Any], read: Callable[[Mapping[str, Any]], Frame]) -> Frame:
    """``read(body)``'s frame, the very one read before for a body with the same frame."""
    try:
        key = marshal.dumps({k: v for k, v in body.items() if k not in TURNS}, 2)
    except ValueError:  # not a JSON value (a client's body is parsed JSON: never)
        return read(body)
    found = _FRAMES.get(key)
    if found is not None:
        _FRAMES.move_to_end(key)
        return found
    frame = read(body)
    if frame.kept:
        if len(_FRAMES) >= FRAMES_AT_MOST:
            _FRAMES.popitem(last=False)
        _FRAMES[key] = frame
    return frame


def planned(
    inbound: Inbound, target: Target, own: dict[str, Any]
) -> tuple[CanonicalRequest, list[str]]:
    """The canonical request of ``inbound`` (whose frame was kept) for ``target``, with the
    gateway's ``own`` changes, and what its projection left out: as ``Inbound.request`` of the
    projection's output limit and changes makes it. A pydantic ValidationError when the
    frame's fields are not valid, as building it is."""
    frame: Frame = inbound.frame
    model, caps = target.request_model, target.capabilities
    key = (model, id(caps), tuple(own.items()))
    plan = frame.plans.get(key)
    if plan is None or plan.capabilities is not caps:
        limit, changes, dropped = project(inbound, caps, target.wire_model)
        changes.update(own)
        fields = {**inbound.fields, **changes}
        template = CanonicalRequest(model=model, messages=[], max_output_tokens=limit, **fields)
        plan = Plan(caps, template, changes, dropped)
        if len(frame.plans) >= PLANS_AT_MOST:
            frame.plans.popitem(last=False)
        frame.plans[key] = plan
    fields, mine = inbound.fields, {}
    for name in MUTABLE:
        if name in fields and name not in plan.changes:
            mine[name] = fields[name]  # (this request's own copy, Frame.given)
        elif isinstance(value := getattr(plan.template, name), list | dict):
            mine[name] = value.copy()  # (a default, or what the projection left: empty)
    request = plan.template.model_copy(
        update={"messages": list(inbound.messages), "request_id": new_request_id(), **mine}
    )
    return request, list(plan.dropped)


def clear() -> None:
    """Forget every frame kept (tests)."""
    _FRAMES.clear()
