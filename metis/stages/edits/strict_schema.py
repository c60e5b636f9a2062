"""The ``strict_schema`` stage: OpenAI strict mode (structured outputs) where it is safe.

:func:`~metis.wire.strict_schema.to_strict_schema` rewrites a schema into strict
mode's subset of JSON Schema, or answers ``None`` when it cannot without changing what the
schema means. The stage applies it to an OpenAI Chat body's function tools and ``json_schema``
response format, and to a Responses body's function tools (their fields on the tool itself, and
``strict: false`` unless the tool asked for strict); a tool it cannot convert stays non-strict,
with one INFO record saying why (the dropped-content WARN when the tool asked for strict).

Strict mode makes the model send ``"offset": null`` where the caller's schema said the key may
be absent, so for the tools it made strict the stage also removes, from each
:class:`~metis.model.events.ToolUseEnd` and the final :class:`~metis.model.content.ToolUseBlock`,
the ``null`` values of keys that were optional in the caller's own schema
(:mod:`metis.wire.strict_schema_nulls`); such events are passed on as new events. (The
streamed ``partial_json`` fragments are the provider's bytes as received and keep their nulls.)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import marshal
from typing import Any

from metis.model.content import ToolUseBlock
from metis.model.events import MessageComplete, StreamEvent, ToolUseEnd
from metis.model.schema_forms import prepared
from metis.model.tool_fit import STRICT_FLAG
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.request import WireRequest
from metis.stages.options import StrictSchemaOptions
from metis.wire.json_limits import json_copy
from metis.wire.strict_schema import Schema, strict_schema_or_reason, to_strict_schema
from metis.wire.strict_schema_nulls import strip_optional_nulls

log = logging.getLogger("metis")

__all__ = ["StrictSchema", "strict_schema_or_reason", "strip_optional_nulls", "to_strict_schema"]


class StrictSchema(EventHook[WireRequest]):
    """A wire edit with a watch: ``open`` makes the body strict; the watch takes the nulls
    strict mode forces out of the inputs of the tools it made strict."""

    name = "strict_schema"
    role = "edit"

    Options = StrictSchemaOptions

    options: StrictSchemaOptions
    fresh_wire = False
    """Set when an application's own stage follows: each converted schema a copy of its own."""

    async def open(self, request: WireRequest, call: Call) -> tuple[WireRequest, Watch | None]:
        request, originals = self.convert(request, call)
        if not originals:  # nothing made strict: nothing to restore on the way out
            return request, None
        return request, _Restore(originals)

    def convert(self, request: WireRequest, call: Call) -> tuple[WireRequest, dict[str, Schema]]:
        """The request with its body made strict where it can be, and the original parameter
        schema of each tool made strict, by tool name."""
        body = request.body
        originals: dict[str, Schema] = {}
        new_body: dict[str, Any] | None = None

        tools = body.get("tools")
        if self.options.tools and isinstance(tools, list) and tools:
            new_tools = [self._tool(tool, call, originals) for tool in tools]
            if any(a is not b for a, b in zip(new_tools, tools, strict=True)):
                new_body = {**body, "tools": new_tools}

        fmt = body.get("response_format")
        if self.options.response_format and isinstance(fmt, dict):
            new_fmt = self._response_format(fmt, call)
            if new_fmt is not fmt:
                new_body = {**(new_body or body), "response_format": new_fmt}

        if new_body is None:
            return request, originals
        return dataclasses.replace(request, body=new_body), originals

    def _tool(self, tool: Any, call: Call, originals: dict[str, Schema]) -> Any:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return tool
        # Chat nests the function under ``function``; Responses has its fields on the tool.
        nested = "function" in tool
        function = tool.get("function") if nested else tool
        if not isinstance(function, dict) or function.get("strict") is False:
            return tool  # not a function tool, or the caller (or the codec) turned strict off
        name = function.get("name")
        # An omitted ``parameters`` is OpenAI's "no parameters": the empty object.
        params = function.get("parameters", {"type": "object", "properties": {}})
        converted, reason, original = _strict_tool(params, self.fresh_wire)
        if converted is None and function.get("strict") is True:  # the caller asked for it
            call.warn_dropped(STRICT_FLAG, f"tool {name!r} is sent without strict: {reason}")
            kept = {k: v for k, v in function.items() if k != "strict"}
            # Responses' default is strict: the flag goes as false rather than left out
            return {**tool, "function": kept} if nested else {**kept, "strict": False}
        if converted is None:
            log.info("strict_schema: tool %r left non-strict: %s", name, reason)
            return tool
        if isinstance(name, str):
            originals[name] = params if original is None else original
        made = {**function, "parameters": converted, "strict": True}
        return {**tool, "function": made} if nested else made

    def _response_format(self, fmt: dict[str, Any], call: Call) -> dict[str, Any]:
        spec = fmt.get("json_schema")
        if fmt.get("type") != "json_schema" or not isinstance(spec, dict):
            return fmt
        if spec.get("strict") is False or "schema" not in spec:
            return fmt
        converted, reason, _ = _strict(spec["schema"])
        if converted is None:
            log.info(
                "strict_schema: response format %r left non-strict: %s", spec.get("name"), reason
            )
            return fmt
        return {**fmt, "json_schema": {**spec, "schema": converted, "strict": True}}


class _Restore(Watch):
    """The caller's optional keys, not strict mode's nulls, in the tools' final inputs."""

    __slots__ = ("originals",)
    kinds = (ToolUseEnd, MessageComplete)

    def __init__(self, originals: dict[str, Schema]) -> None:
        self.originals = originals

    def event(self, event: StreamEvent) -> StreamEvent:
        if isinstance(event, ToolUseEnd):
            schema = self.originals.get(event.tool_name)
            if schema is not None:
                cleaned = strip_optional_nulls(event.final_input, schema)
                if cleaned is not event.final_input:
                    return dataclasses.replace(event, final_input=cleaned)
        elif isinstance(event, MessageComplete):
            content = _restore_blocks(event.final_content, self.originals)
            if content is not event.final_content:
                return dataclasses.replace(event, final_content=content)
        return event


def _restore_blocks(blocks: list[Any], originals: dict[str, Schema]) -> list[Any]:
    out: list[Any] | None = None
    for i, block in enumerate(blocks):
        if not isinstance(block, ToolUseBlock):
            continue
        schema = originals.get(block.name)
        if schema is None:
            continue
        cleaned = strip_optional_nulls(block.input, schema)
        if cleaned is not block.input:
            out = list(blocks) if out is None else out
            out[i] = block.model_copy(update={"input": cleaned})
    return blocks if out is None else out


_CONVERTED: dict[bytes | str, tuple[bytes | None, str | None, Schema]] = {}
"""Each response format's schema converted so far, by its marshal form (version 2: every
part's exact type, no references that vary with refcounts; its JSON text for a schema marshal
cannot write): the strict schema's marshal form, or the reason it has none, and the schema
itself as read from its JSON text. The encoder makes that schema anew for each request."""
_CONVERTED_AT_MOST = 256
_STRICT_FORM = "strict_schema"


def _strict_tool(schema: Any, fresh: bool) -> tuple[Schema | None, str | None, Schema | None]:
    """:func:`_strict` of a tool's parameters, kept with the schema object
    (:mod:`metis.model.schema_forms`): a tool's schema is the very object its canonical tool
    holds, call after call, so its strict form is made once and shared by every body that
    sends it (a copy of its own when ``fresh``: an application's stage follows), and the
    caller's schema given for the watch is the record's own copy (only read)."""
    record = prepared(schema)
    if record is None:
        return _strict(schema)
    kept = record.forms.get(_STRICT_FORM)
    if kept is None:
        converted, reason = strict_schema_or_reason(schema)
        try:  # (a schema the sendable check passed is JSON: never fails)
            converted = None if converted is None else json.loads(json.dumps(converted))
        except (TypeError, ValueError):
            return _strict(schema)
        kept = record.forms[_STRICT_FORM] = (converted, reason)
    converted, reason = kept
    if fresh and converted is not None:
        converted = json_copy(converted)
    return converted, reason, record.held


def _strict(schema: Any) -> tuple[Schema | None, str | None, Schema | None]:
    """:func:`strict_schema_or_reason`, read of a schema converted before when there is one
    (each converted schema a new object: a later edit may change the body), and the caller's
    schema as kept for it: one object for every request that sends it (only read, by the
    watch that takes strict mode's nulls out; None when ``schema`` is not JSON). A stream in
    flight so holds no copy of its tools' schemas of its own for that watch."""
    try:
        key: bytes | str = marshal.dumps(schema, 2)
    except ValueError:  # a class of the application's (a str enum): found by its JSON text
        key = ""
    kept = _CONVERTED.get(key) if key else None
    if kept is None:
        try:
            text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # not JSON: converted afresh (and refused by the API)
            return (*strict_schema_or_reason(schema), None)
        key = key or text
        kept = _CONVERTED.get(key)
    if kept is None:
        converted, reason = strict_schema_or_reason(schema)
        made = None if converted is None else marshal.dumps(json.loads(json.dumps(converted)), 2)
        kept = (made, reason, json.loads(text))
        if len(_CONVERTED) >= _CONVERTED_AT_MOST:
            _CONVERTED.clear()
        _CONVERTED[key] = kept
    made, reason, original = kept
    return (None if made is None else marshal.loads(made)), reason, original
