"""Stored histories carry the blocks of issue 22 in the OpenAI Chat and Anthropic forms, both
ways (``metis.histories``): server-tool calls and results, citations, opaque blocks and custom
tool calls (documents and audio: tests/histories/test_histories_files.py). Each goes back to its own
format as it came; to the other, as metis sends it to that provider (docs/contract.md §8, §10,
§11, §12), and what the other cannot carry is left out with the lossy-projection WARN.

Wire samples: anthropic-sdk-python ``server_tool_use_block``, ``web_search_tool_result_block``
(``web_search_result_block``), ``code_execution_tool_result_block``, ``text_citation``
(``citations_web_search_result_location``), ``beta_mcp_tool_use_block``; openai-python
``ChatCompletionMessage.annotations`` (``Annotation.url_citation``),
``ChatCompletionMessageCustomToolCall``, ``ChatCompletionContentPartRefusalParam``.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from metis.histories import from_anthropic, from_openai_chat, to_anthropic, to_openai_chat
from metis.model import OpaqueBlock, TextBlock, ToolUseBlock
from metis.model.server_tools import (
    CodeOutput,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
)

SEARCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "Euro 2024 winner"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://www.uefa.com/euro2024/",
            "title": "UEFA EURO 2024",
            "encrypted_content": "EqgfCioIARgBIiQ3",
            "page_age": "July 15, 2024",
        }
    ],
}
CITED_TEXT = {
    "type": "text",
    "text": "Spain won Euro 2024.",
    "citations": [
        {
            "type": "web_search_result_location",
            "url": "https://www.uefa.com/euro2024/",
            "title": "UEFA EURO 2024",
            "encrypted_index": "Eo8BCioIAhgBIiQy",
            "cited_text": "Spain beat England 2-1 in the final.",
        }
    ],
}
CODE_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_02",
    "name": "code_execution",
    "input": {"code": "print(2 + 2)"},
}
CODE_RESULT = {
    "type": "code_execution_tool_result",
    "tool_use_id": "srvtoolu_02",
    "content": {
        "type": "code_execution_result",
        "stdout": "4\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    },
}
MCP_CALL = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_01",
    "name": "get_weather",
    "server_name": "weather",
    "input": {"city": "Oslo"},
}
ANTHROPIC = [
    {"role": "user", "content": "Who won Euro 2024? And what is 2 + 2?"},
    {
        "role": "assistant",
        "content": [SEARCH_CALL, SEARCH_RESULT, CITED_TEXT, CODE_CALL, CODE_RESULT, MCP_CALL],
    },
]


def _lossy(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(r, "block_type", ""))
        for r in caplog.records
        if getattr(r, "event", "") == "metis.lossy_projection"
    ]


def test_anthropic_server_tools_citations_and_opaque_blocks_import_as_canonical_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="metis"):
        _, reply = from_anthropic(copy.deepcopy(ANTHROPIC), model="claude-sonnet-4-6")
    assert _lossy(caplog) == []
    search, found, text, code, ran, mcp = reply.content
    assert isinstance(search, ServerToolCallBlock)
    assert (search.id, search.name, search.input) == (
        "srvtoolu_01",
        "web_search",
        SEARCH_CALL["input"],
    )
    assert isinstance(found, ServerToolResultBlock) and found.tool_call_id == search.id
    assert found.search_results == [
        SearchResult(
            url="https://www.uefa.com/euro2024/", title="UEFA EURO 2024", page_age="July 15, 2024"
        )
    ]
    assert isinstance(text, TextBlock) and text.citations is not None
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.cited_text) == (
        "url",
        "https://www.uefa.com/euro2024/",
        "Spain beat England 2-1 in the final.",
    )
    assert isinstance(code, ServerToolCallBlock) and code.name == "code_execution"
    assert isinstance(ran, ServerToolResultBlock) and ran.name == "code_execution"
    assert ran.code_output == CodeOutput(stdout="4\n", exit_code=0)
    assert isinstance(mcp, OpaqueBlock) and mcp.kind == "mcp_tool_use"
    assert search.provider_raw is not None and search.provider_raw.model == "claude-sonnet-4-6"
    assert mcp.provider_raw.model == "claude-sonnet-4-6"


def test_an_anthropic_history_goes_back_to_anthropic_as_it_came() -> None:
    body = to_anthropic(from_anthropic(copy.deepcopy(ANTHROPIC)))
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": ANTHROPIC[0]["content"]}]},
        ANTHROPIC[1],
    ]


def test_an_anthropic_history_in_chat_form_says_what_the_server_tools_did(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Chat has no server tools: a result goes as text saying what was called and what it
    returned, its call in it; an MCP block and a citation with no span are left out."""
    with caplog.at_level(logging.WARNING, logger="metis"):
        chat = to_openai_chat(from_anthropic(copy.deepcopy(ANTHROPIC)))
    assert _lossy(caplog) == ["mcp_tool_use", "citation"]
    content = chat[1]["content"]
    assert content.startswith(
        '[web_search {"query": "Euro 2024 winner"}]\n- UEFA EURO 2024 <https://www.uefa.com/euro2024/>'
    )
    assert "Spain won Euro 2024." in content
    assert "[code_execution" in content and "stdout:\n4\n" in content
    assert "mcptoolu_01" not in str(chat) and "annotations" not in chat[1]


CHAT = [
    {"role": "user", "content": "Who won Euro 2024? Then patch the file."},
    {
        "role": "assistant",
        "content": "Spain won Euro 2024.",
        "annotations": [
            {
                "type": "url_citation",
                "url_citation": {
                    "start_index": 0,
                    "end_index": 20,
                    "title": "UEFA EURO 2024",
                    "url": "https://www.uefa.com/euro2024/",
                },
            }
        ],
        "tool_calls": [
            {
                "id": "call_1",
                "type": "custom",
                "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "patched"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Done. "},
            {"type": "refusal", "refusal": "I will not delete the repository."},
        ],
    },
]


def test_chat_citations_custom_calls_and_unknown_parts_import_as_canonical_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="metis"):
        messages = from_openai_chat(copy.deepcopy(CHAT))
    assert _lossy(caplog) == []
    text, call = messages[1].content
    assert isinstance(text, TextBlock) and text.citations is not None
    (cited,) = text.citations
    assert (cited.url, cited.title, cited.span.start, cited.span.end) == (  # type: ignore[union-attr]
        "https://www.uefa.com/euro2024/",
        "UEFA EURO 2024",
        0,
        20,
    )
    assert isinstance(call, ToolUseBlock) and call.input == {
        "input": "*** Begin Patch\n*** End Patch"
    }
    done, refusal = messages[3].content
    assert done == TextBlock(text="Done. ")
    assert isinstance(refusal, OpaqueBlock) and refusal.kind == "refusal"


def test_chat_annotations_a_history_cannot_carry_are_left_out_with_a_warn_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An annotation that is no url citation (none has a canonical form), and citations on a
    message of two texts (their spans count in one), are said, as the reply readers say them."""
    stored = copy.deepcopy(CHAT[:2])
    stored[1]["annotations"] = [*CHAT[1]["annotations"], {"type": "file_path"}, "odd"]
    with caplog.at_level(logging.WARNING, logger="metis"):
        (text, _call) = from_openai_chat(stored)[1].content
    assert isinstance(text, TextBlock) and text.citations is not None
    assert _lossy(caplog) == ["annotation file_path", "annotation 'odd'"]
    assert "at messages[1].annotations" in caplog.records[0].getMessage()
    caplog.clear()
    stored[1]["content"] = [{"type": "text", "text": "Spain won "}, {"type": "text", "text": "."}]
    with caplog.at_level(logging.WARNING, logger="metis"):
        (first, _second, _call) = from_openai_chat(stored)[1].content
    assert isinstance(first, TextBlock) and first.citations is None
    assert _lossy(caplog) == ["annotation file_path", "annotation 'odd'", "citation"]


def test_a_chat_history_goes_back_to_chat_as_it_came() -> None:
    exported = to_openai_chat(from_openai_chat(copy.deepcopy(CHAT)))
    sent_call = exported[1]["tool_calls"][0]
    assert exported[1] == {
        **CHAT[1],
        "tool_calls": [{**CHAT[1]["tool_calls"][0], "id": sent_call["id"]}],
    }
    assert exported[2] == {**CHAT[2], "tool_call_id": sent_call["id"]}
    assert exported[3] == CHAT[3]


def test_a_chat_history_in_anthropic_form_keeps_what_anthropic_can_carry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A custom call is a tool call of one string (docs/contract.md §10); Chat's citation and
    refusal part have no Anthropic form."""
    with caplog.at_level(logging.WARNING, logger="metis"):
        body = to_anthropic(from_openai_chat(copy.deepcopy(CHAT)))
    assert _lossy(caplog) == ["citation", "refusal"]
    text, call = body["messages"][1]["content"]
    assert text == {"type": "text", "text": "Spain won Euro 2024."}
    assert call["type"] == "tool_use" and call["input"] == {
        "input": "*** Begin Patch\n*** End Patch"
    }
    assert body["messages"][3]["content"] == [{"type": "text", "text": "Done. "}]


def test_citations_made_elsewhere_become_chat_annotations_at_their_span() -> None:
    """A citation with a URL and a span goes to Chat whoever made it, counted in the joined
    text of the message."""
    from metis.model import Message
    from metis.model.citation import Citation, TextSpan

    cited = Citation(
        kind="url", url="https://example.com/a", title="A", span=TextSpan(start=0, end=3)
    )
    message = Message.assistant(TextBlock(text="Hi. "), TextBlock(text="Yes.", citations=[cited]))
    (entry,) = to_openai_chat([message])
    assert entry["content"] == "Hi. Yes."
    assert entry["annotations"] == [
        {
            "type": "url_citation",
            "url_citation": {
                "start_index": 4,
                "end_index": 7,
                "url": "https://example.com/a",
                "title": "A",
            },
        }
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "mcp_tool_use", "input": {"x": float("nan")}},
        {
            "type": "text",
            "text": "t",
            "citations": [{"type": "web_search_result_location", "url": "\ud800"}],
        },
    ],
)
def test_a_stored_block_json_cannot_carry_is_refused_naming_where(bad: dict[str, Any]) -> None:
    from metis.errors import InvalidRequestError

    with pytest.raises(InvalidRequestError, match=r"messages\[0\]\.content\[0\]"):
        from_anthropic([{"role": "assistant", "content": [bad]}])
