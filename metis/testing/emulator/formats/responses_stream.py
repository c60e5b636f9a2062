"""The Responses API's stream of a rendered response: ``response.created``,
``response.in_progress``, each output item's events (reasoning summary parts and deltas,
``output_text`` deltas and annotations, server tools' progress, a compaction item whole,
``function_call_arguments`` deltas), then ``response.completed`` (``response.incomplete`` when
``max_output_tokens`` cut it)."""

from __future__ import annotations

from typing import Any

from metis.testing.emulator.formats.server_openai import (
    annotation_events,
    responses_server_events,
)
from metis.testing.emulator.wire import Frame, Ids, split_json, split_text, sse


def response_events(response: dict[str, Any], ids: Ids, obfuscate: bool) -> list[Frame]:
    """A rendered response as the Responses API streams it."""
    frames: list[Frame] = []

    def emit(kind: str, data: dict[str, Any], delta: bool = False) -> None:
        event = {"type": kind, "sequence_number": len(frames), **data}
        if delta and obfuscate:
            event["obfuscation"] = ids.token(3 + len(frames) % 11)
        frames.append(sse(event, kind))

    pending = {
        **response,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "incomplete_details": None,
    }
    emit("response.created", {"response": pending})
    emit("response.in_progress", {"response": pending})
    for index, item in enumerate(response["output"]):
        _item_events(emit, index, item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    emit(final, {"response": response})
    return frames


def _item_events(emit: Any, index: int, item: dict[str, Any]) -> None:
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "reasoning":
        emit("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}})
        for s_index, part in enumerate(item["summary"]):
            at = {**where, "summary_index": s_index}
            emit(
                "response.reasoning_summary_part.added",
                {**at, "part": {"type": "summary_text", "text": ""}},
            )
            for piece in split_text(part["text"]):
                emit("response.reasoning_summary_text.delta", {**at, "delta": piece}, True)
            emit("response.reasoning_summary_text.done", {**at, "text": part["text"]})
            emit("response.reasoning_summary_part.done", {**at, "part": part})
    elif item["type"] == "compaction":  # whole, in its added and done events
        emit("response.output_item.added", {"output_index": index, "item": item})
    elif item["type"] == "message":
        emit(
            "response.output_item.added",
            {"output_index": index, "item": {**item, "status": "in_progress", "content": []}},
        )
        part, at = item["content"][0], {**where, "content_index": 0}
        emit("response.content_part.added", {**at, "part": {**part, "text": "", "annotations": []}})
        for piece in split_text(part["text"]):
            emit("response.output_text.delta", {**at, "delta": piece, "logprobs": []}, True)
        annotation_events(emit, at, part)
        emit("response.output_text.done", {**at, "text": part["text"], "logprobs": []})
        emit("response.content_part.done", {**at, "part": part})
    elif item["type"] in ("web_search_call", "code_interpreter_call"):
        responses_server_events(emit, index, item)
    else:
        emit(
            "response.output_item.added",
            {"output_index": index, "item": {**item, "status": "in_progress", "arguments": ""}},
        )
        for piece in split_json(item["arguments"]):
            emit("response.function_call_arguments.delta", {**where, "delta": piece}, True)
        emit("response.function_call_arguments.done", {**where, "arguments": item["arguments"]})
    emit("response.output_item.done", {"output_index": index, "item": item})
