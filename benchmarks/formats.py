"""The three wire formats beyond Anthropic's and Chat Completions': OpenAI Responses, Gemini and
Ollama. Stream bodies (what the server sends, event by event) and the native requests the floor
sends, shaped after the recordings in the providers' documentation and real traffic:

- Responses: ``event:`` + ``data:`` SSE, ``response.created`` ... ``output_text.delta`` per
  word, ``function_call_arguments.delta`` per fragment, ``response.completed`` with the whole
  output and usage again (as the API sends it), ``sequence_number`` and ``obfuscation`` fields.
- Gemini (``streamGenerateContent?alt=sse``): ``data:`` lines ended by CRLF CRLF, one candidate
  chunk per word with ``usageMetadata``; the function call arrives whole, with no id, in the
  last chunk (its ``finishReason`` is ``STOP``): there are no tool fragments.
- Ollama (``/api/chat``): NDJSON, one object per word, the tool call whole in one object, then
  ``done: true`` with ``done_reason`` and the timing fields.
"""

from __future__ import annotations

import json
from typing import Any

from benchmarks.workload import QUESTION, SYSTEM, TOOL_NAME, TOOL_SCHEMA, Scenario

RESPONSES_MODEL = "gpt-4o"
GEMINI_MODEL = "gemini-2.5-flash"
OLLAMA_MODEL = "llama3.2"
RESPONSES_TOOL_ID = "call_BenchResponses00000000"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {_compact(data)}\n\n".encode()


# OpenAI Responses --------------------------------------------------------------------------


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": "resp_BenchStream",
        "object": "response",
        "created_at": 1760000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": SYSTEM,
        "max_output_tokens": 1024,
        "model": "gpt-4o-2024-08-06",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "metadata": {},
    }


def responses_stream_events(scenario: Scenario) -> list[bytes]:
    words = scenario.words()
    fragments = scenario.tool_fragments_json()
    text, arguments = "".join(words), "".join(fragments)
    seq = iter(range(1_000_000))
    message_id, call_item = "msg_BenchStream", "fc_BenchStream"

    def event(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
    message = {
        "id": message_id,
        "type": "message",
        "status": "completed",
        "content": [part],
        "role": "assistant",
    }
    call = {
        "id": call_item,
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": RESPONSES_TOOL_ID,
        "name": TOOL_NAME,
    }
    at = {"item_id": message_id, "output_index": 0, "content_index": 0}
    events = [
        event("response.created", response=_response("in_progress", [], None)),
        event("response.in_progress", response=_response("in_progress", [], None)),
        event(
            "response.output_item.added",
            output_index=0,
            item={**message, "status": "in_progress", "content": []},
        ),
        event("response.content_part.added", **at, part={**part, "text": ""}),
    ]
    events += [
        event("response.output_text.delta", **at, delta=w, logprobs=[], obfuscation="Xy3")
        for w in words
    ]
    events += [
        event("response.output_text.done", **at, text=text, logprobs=[]),
        event("response.content_part.done", **at, part=part),
        event("response.output_item.done", output_index=0, item=message),
        event(
            "response.output_item.added",
            output_index=1,
            item={**call, "status": "in_progress", "arguments": ""},
        ),
    ]
    events += [
        event(
            "response.function_call_arguments.delta",
            item_id=call_item,
            output_index=1,
            delta=fragment,
            obfuscation="Ab",
        )
        for fragment in fragments
    ]
    output_tokens = scenario.text_deltas + scenario.tool_fragments
    usage = {
        "input_tokens": 412,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 412 + output_tokens,
    }
    events += [
        event(
            "response.function_call_arguments.done",
            item_id=call_item,
            output_index=1,
            arguments=arguments,
        ),
        event("response.output_item.done", output_index=1, item=call),
        event("response.completed", response=_response("completed", [message, call], usage)),
    ]
    return events


# Gemini ------------------------------------------------------------------------------------


def gemini_stream_events(scenario: Scenario) -> list[bytes]:
    def chunk(parts: list[Any], count: int, finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        body = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 412,
                "candidatesTokenCount": count,
                "totalTokenCount": 412 + count,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 412}],
            },
            "modelVersion": GEMINI_MODEL,
            "responseId": "BenchGeminiStream0",
        }
        return f"data: {_compact(body)}\r\n\r\n".encode()

    events = [chunk([{"text": w}], i + 1) for i, w in enumerate(scenario.words())]
    call = {"functionCall": {"name": TOOL_NAME, "args": scenario.tool_input()}}
    events.append(chunk([call], scenario.text_deltas + 1, "STOP"))
    return events


# Ollama ------------------------------------------------------------------------------------


def ollama_stream_events(scenario: Scenario) -> list[bytes]:
    def line(message: dict[str, Any], **more: Any) -> bytes:
        body = {
            "model": OLLAMA_MODEL,
            "created_at": "2025-11-20T10:00:00.000000Z",
            "message": {"role": "assistant", **message},
            **more,
        }
        return (_compact(body) + "\n").encode()

    events = [line({"content": w}, done=False) for w in scenario.words()]
    call = {"function": {"name": TOOL_NAME, "arguments": scenario.tool_input()}}
    events.append(line({"content": "", "tool_calls": [call]}, done=False))
    events.append(
        line(
            {"content": ""},
            done=True,
            done_reason="stop",
            total_duration=4_000_000_000,
            load_duration=20_000_000,
            prompt_eval_count=412,
            prompt_eval_duration=100_000_000,
            eval_count=scenario.text_deltas + 1,
            eval_duration=3_800_000_000,
        )
    )
    return events


# The floor's native requests ---------------------------------------------------------------


def native_stream_request(provider: str) -> dict[str, Any]:
    """A streamed request in ``provider``'s own format (the server only reads ``stream``)."""
    if provider == "responses":
        return {
            "model": RESPONSES_MODEL,
            "instructions": SYSTEM,
            "input": [{"role": "user", "content": QUESTION}],
            "tools": [
                {
                    "type": "function",
                    "name": TOOL_NAME,
                    "description": "Current weather",
                    "parameters": TOOL_SCHEMA,
                }
            ],
            "max_output_tokens": 1024,
            "stream": True,
        }
    if provider == "gemini":
        return {
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [{"role": "user", "parts": [{"text": QUESTION}]}],
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "name": TOOL_NAME,
                            "description": "Current weather",
                            "parameters": TOOL_SCHEMA,
                        }
                    ]
                }
            ],
            "generationConfig": {"maxOutputTokens": 1024},
        }
    return {
        "model": OLLAMA_MODEL,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": TOOL_NAME,
                    "description": "Current weather",
                    "parameters": TOOL_SCHEMA,
                },
            }
        ],
        "stream": True,
    }
