"""A client's field inside a message, content part or tool that the translated path leaves
out is named where it was (``messages[0].content[0].foo``), as a top-level one is; a field the
reader maps is never named; the fields metis does not map are, real ones of the API included.
The SDKs' own request types (anthropic, openai) say which fields are real."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from metis.gateway.anthropic_api import read_messages
from metis.gateway.chat_api import read_chat
from metis.gateway.responses_read import read_responses
from metis.gateway.unread import ANTHROPIC_BLOCKS, CHAT_PARTS, RESPONSES_ITEMS, RESPONSES_PARTS

PNG = "iVBORw0KGgo="


def fields(kind: Any) -> set[str]:
    return set(typing.get_type_hints(kind))


def test_every_field_metis_maps_is_a_real_one() -> None:
    """A key read as mapped must be the API's, or a real field would hide an unknown one."""
    import anthropic.types as a
    import openai.types.chat as c
    import openai.types.responses as r

    assert ANTHROPIC_BLOCKS["text"] <= fields(a.TextBlockParam)
    assert ANTHROPIC_BLOCKS["tool_use"] <= fields(a.ToolUseBlockParam)
    assert ANTHROPIC_BLOCKS["tool_result"] <= fields(a.ToolResultBlockParam)
    assert ANTHROPIC_BLOCKS["document"] <= fields(a.DocumentBlockParam)
    assert CHAT_PARTS["text"] <= fields(c.ChatCompletionContentPartTextParam)
    assert RESPONSES_PARTS["input_image"] <= fields(r.ResponseInputImageParam)
    assert RESPONSES_PARTS["input_file"] <= fields(r.ResponseInputFileParam)
    assert RESPONSES_ITEMS["function_call"] <= fields(r.ResponseFunctionToolCallParam)


def test_anthropic_names_what_it_leaves_out_inside_and_nothing_it_maps() -> None:
    body = {
        "model": "m",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "Be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hi", "citations": None},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                    {"type": "text", "text": "x", "zzz": 1},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "f",
                        "input": {},
                        "caller": {"type": "direct"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": False,
                        "content": [{"type": "text", "text": "ok", "yyy": 2}],
                    }
                ],
            },
        ],
        "tools": [
            {"name": "f", "description": "d", "input_schema": {"type": "object"}, "strict": True},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 1},
        ],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    body["tools"].append({"type": "bash_20250124", "name": "bash"})
    assert read_messages(body).ignored == [
        "tools[2] (bash_20250124)",  # a server tool metis has no form for: named whole
        "system[0].cache_control",
        "messages[0].content[2].zzz",
        "messages[1].content[1].caller",
        "messages[2].content[0].content[0].yyy",
    ]


def test_chat_names_what_it_leaves_out_inside_and_nothing_it_maps() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "developer", "content": "Be brief", "name": "ops"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hi"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "low"}},
                    {"type": "file", "file": {"file_data": PNG, "filename": "a.pdf"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok", "zzz": 3},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {}, "strict": False},
            }
        ],
    }
    assert read_chat(body).ignored == [
        "messages[0].name",
        "messages[1].content[1].image_url.detail",
        "messages[3].zzz",
    ]


def test_chat_names_each_annotation_it_leaves_out_by_its_type() -> None:
    """OpenRouter's ``file`` annotation (its parse of a PDF, given back to skip parsing it
    again) and any other a Chat-compatible service sends has no canonical form; a URL
    citation is the text's citation, and not named."""
    cited = {"type": "url_citation", "url_citation": {"url": "https://a", "title": "A"}}
    parsed = {"type": "file", "file": {"hash": "h1", "name": "a.pdf", "content": []}}
    notes = [cited, parsed, {"type": "x_other"}, "junk"]
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "Read a.pdf"},
            {"role": "assistant", "content": "It says hi.", "annotations": notes},
            {"role": "user", "content": "More"},
        ],
    }
    assert read_chat(body).ignored == [
        "messages[1].annotations[1] (file annotation: no canonical form)",
        "messages[1].annotations[2] (x_other annotation: no canonical form)",
        "messages[1].annotations[3] (str annotation: no canonical form)",
    ]


def test_responses_names_what_it_leaves_out_inside_and_nothing_it_maps() -> None:
    body = {
        "model": "m",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "phase": "final_answer",
                "content": [
                    {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
                ],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "f",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "ok", "zzz": 4},
        ],
        "tools": [
            {
                "type": "function",
                "name": "f",
                "parameters": {},
                "strict": True,
                "defer_loading": True,
            }
        ],
        "reasoning": {"effort": "low", "summary": "auto"},
    }
    assert read_responses(body).ignored == [
        "input[1].phase",
        "input[3].zzz",
        "tools[0].defer_loading",
    ]


@pytest.mark.parametrize("empty", [None, [], {}])
def test_a_nested_field_given_empty_asks_for_nothing(empty: Any) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi", "name": empty}]}
    assert read_chat(body).ignored == []
