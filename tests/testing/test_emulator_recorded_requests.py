"""Requests of the shapes real clients sent, which the provider's answer in the recording
shows it took or refused, sent straight to the emulator at its own API: it takes what the
provider took and refuses, in the provider's words, what it refused."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis.testing.emulator import Emulator

SAID = [{"role": "user", "content": "Name a large city in Peru."}]
HEARD = [
    {"role": "user", "content": "What is said?"},
    {
        "role": "user",
        "content": [{"type": "input_audio", "input_audio": {"format": "mp3", "data": "AA=="}}],
    },
]
CHAT_TAKES = {
    # pydantic/pydantic-ai test_stop_settings[openai]: o3-mini stopped at the word it was given
    "o3-mini-stop": {"model": "o3-mini", "stop": ["Lima"]},
    "search-model-web-search": {
        "model": "gpt-4o-search-preview",
        "web_search_options": {"search_context_size": "low"},
    },
    # crewAIInc/crewAI TestOpenAINativeToolCalling, envoyproxy/ai-gateway chat-multiturn:
    # a reasoning model takes the temperature it has anyway
    "gpt-5-nano-default-temperature": {"model": "gpt-5-nano", "temperature": 1},
    # pydantic/pydantic-ai test_audio_as_binary_content_input (gpt-4o-audio-preview: 200)
    "audio-model-hears": {"model": "gpt-4o-audio-preview", "messages": HEARD},
}
CHAT_REFUSES = {
    # crewAIInc/crewAI test_llm_call_when_stop_is_unsupported
    "o1-mini-stop": ({"model": "o1-mini", "stop": ["Lima"]}, "'stop' is not supported"),
    # Mirascope/mirascope test_call_with_params/openai_gpt_5_mini_completions
    "gpt-5-mini-stop": ({"model": "gpt-5-mini", "stop": ["Lima"]}, "'stop' is not supported"),
    # pydantic/pydantic-ai test_openai_o1_mini_system_role[developer] and [system]
    "o1-mini-developer-message": (
        {"model": "o1-mini", "messages": [{"role": "developer", "content": "Be brief."}, *SAID]},
        "'messages[0].role' does not support 'developer' with this model",
    ),
    # pydantic/pydantic-ai test_openai_web_search_tool_model_not_supported
    "gpt-4o-web-search": (
        {"model": "gpt-4o", "web_search_options": {"search_context_size": "low"}},
        "Web search options not supported with this model.",
    ),
    "gpt-5-nano-other-temperature": (
        {"model": "gpt-5-nano", "temperature": 0.3},
        "'temperature' is not supported",
    ),
    # pydantic/pydantic-ai tests/models/cassettes/test_multimodal_tool_returns/
    # test_multimodal_tool_return_matrix[direct-binary-audio-openai_chat] and five others
    "gpt-5-mini-audio": (
        {"model": "gpt-5-mini", "messages": HEARD},
        "Invalid 'messages[1]'. Content blocks are expected to be either text or image_url type.",
    ),
    # openai/openai-dotnet tests/SessionRecords/ChatToolTests/
    # StructuredOutputs(WithoutSchema,Strict,FailureExpected).json: a strict function without
    # parameters is an open object
    "strict-function-without-parameters": (
        {
            "model": "gpt-4o-2024-08-06",
            "tools": [{"type": "function", "function": {"name": "color", "strict": True}}],
        },
        "Invalid schema for function 'color': In context=(), 'additionalProperties' is required",
    ),
}


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with Emulator() as emulator, httpx.Client(base_url=emulator.url, timeout=10) as client:
        yield client


def chat(http: httpx.Client, fields: dict[str, Any]) -> httpx.Response:
    body = {"messages": SAID, **fields}
    return http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})


@pytest.mark.parametrize("name", sorted(CHAT_TAKES))
def test_chat_takes_what_openai_took(http: httpx.Client, name: str) -> None:
    reply = chat(http, CHAT_TAKES[name])
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("name", sorted(CHAT_REFUSES))
def test_chat_refuses_what_openai_refused(http: httpx.Client, name: str) -> None:
    fields, said = CHAT_REFUSES[name]
    reply = chat(http, fields)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert said in reply.json()["error"]["message"]


def test_an_inline_image_counts_as_an_image_not_as_its_bytes(http: httpx.Client) -> None:
    """A photo of about a megabyte inline (pydantic/pydantic-ai's
    test_image_as_binary_content_input, 0xPlaygrounds/rig's image_prompt_from_fixture: both
    answered 200): before, its base64 was counted as text, hundreds of thousands of tokens,
    and refused as past the context window."""
    photo = base64.b64encode(bytes(range(256)) * 4000).decode()
    content = [
        {"type": "text", "text": "What is in the photo?"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{photo}"}},
    ]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
    reply = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["usage"]["prompt_tokens"] < 5000
    picture = {"type": "base64", "media_type": "image/jpeg", "data": photo}
    said = [{"type": "image", "source": picture}, {"type": "text", "text": "What is it?"}]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": said}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["usage"]["input_tokens"] < 5000


def test_a_system_turn_may_add_a_tool(http: httpx.Client) -> None:
    """A system turn among the messages that adds a deferred tool (pydantic/pydantic-ai's
    test_native_tool_availability_delta and test_anthropic_lazy_advertisement_live, to
    claude-opus-4-8: 200); before, the emulator took only text there."""
    added = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "find_flight"}}
    turns = [
        {"role": "user", "content": "Book me a flight to Lima."},
        {"role": "assistant", "content": "Let me see what I can use."},
        {"role": "system", "content": [added]},
        {"role": "user", "content": "Go ahead."},
    ]
    body = {"model": "claude-opus-4-8", "max_tokens": 20, "messages": turns}
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 200, reply.text[:300]
    turns[2]["content"] = [
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
    ]
    refused = http.post("/v1/messages", json=body, headers=headers)
    assert refused.status_code == 400, refused.text[:300]


def test_an_empty_user_turn_is_refused_by_anthropic(http: httpx.Client) -> None:
    """Mirascope/mirascope's handles-empty-string-content: Anthropic refused a user turn whose
    content is an empty text (400); the emulator answered it."""
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 20,
        "messages": [{"role": "user", "content": ""}],
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert "must have non-empty content" in reply.json()["error"]["message"]


def test_a_null_cache_control_marks_nothing(http: httpx.Client) -> None:
    """Mirascope/mirascope's test_call_with_mcp_tools (claude-haiku-4-5: 200) sends
    ``cache_control: null`` on each tool result beside four real marks: the emulator counted
    the nulls and refused a fifth breakpoint."""
    marked = {"type": "ephemeral"}
    system = [{"type": "text", "text": f"Rule {n}.", "cache_control": marked} for n in range(4)]
    call = {"type": "tool_use", "id": "toolu_01", "name": "look", "input": {}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": "ok",
        "cache_control": None,
    }
    turns = [
        {"role": "user", "content": "Look around."},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    tool = {"name": "look", "input_schema": {"type": "object"}}
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 20,
        "system": system,
        "tools": [tool],
        "messages": turns,
    }
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 200, reply.text[:300]
    result["cache_control"] = marked
    refused = http.post("/v1/messages", json=body, headers=headers)
    assert refused.status_code == 400, refused.text[:300]
    assert "A maximum of 4 blocks with cache_control" in refused.json()["error"]["message"]


def test_an_assistants_blank_text_before_its_calls_is_taken(http: httpx.Client) -> None:
    """simonw/llm-anthropic's test_tools sends back the assistant's turn as Claude wrote it, a
    text of one space then two tool calls, and claude-haiku-4-5 answered 200; a user's blank
    text is still refused."""
    calls = [
        {"type": "tool_use", "id": f"toolu_0{n}", "name": "pick_name", "input": {}} for n in (1, 2)
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_0{n}", "content": name}
        for n, name in ((1, "Ada"), (2, "Bo"))
    ]
    turns = [
        {"role": "user", "content": "Two names for a goat."},
        {"role": "assistant", "content": [{"type": "text", "text": " "}, *calls]},
        {"role": "user", "content": results},
    ]
    tool = {"name": "pick_name", "input_schema": {"type": "object"}}
    body = {"model": "claude-haiku-4-5", "max_tokens": 20, "tools": [tool], "messages": turns}
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    assert http.post("/v1/messages", json=body, headers=headers).status_code == 200
    turns[0]["content"] = [{"type": "text", "text": "  "}]
    assert http.post("/v1/messages", json=body, headers=headers).status_code == 400


def test_adaptive_thinking_takes_a_loop_opened_without_thinking(http: httpx.Client) -> None:
    """0xPlaygrounds/rig's opus_4_7 adaptive_thinking_streaming_tool_roundtrip_smoke: with
    adaptive thinking the model may answer without thinking, and the tool loop it opened so
    comes back without a thinking block (claude-opus-4-7: 200); manual thinking still asks
    for one."""
    call = {"type": "tool_use", "id": "toolu_07", "name": "forecast", "input": {"city": "Oslo"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_07", "content": "Snow."}
    turns = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]
    tool = {"name": "forecast", "input_schema": {"type": "object"}}
    body = {"model": "claude-opus-4-7", "max_tokens": 2000, "tools": [tool], "messages": turns}
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    adaptive = http.post(
        "/v1/messages", json={**body, "thinking": {"type": "adaptive"}}, headers=headers
    )
    assert adaptive.status_code == 200, adaptive.text[:300]
    manual = {"type": "enabled", "budget_tokens": 1024}
    body["model"] = "claude-sonnet-4-5"
    refused = http.post("/v1/messages", json={**body, "thinking": manual}, headers=headers)
    assert refused.status_code == 400, refused.text[:300]
    assert "must start with a thinking block" in refused.json()["error"]["message"]


@pytest.mark.parametrize("model", ["o1-mini", "o1-preview"])
def test_the_first_o1_models_are_not_on_the_responses_api(http: httpx.Client, model: str) -> None:
    """vkryukov/req_llm's fixtures openai/o1_mini and o1_preview basic.json: OpenAI refused them on
    the Responses API (400, model_not_found); the emulator answered."""
    body = {"model": model, "input": "Name a large city in Peru."}
    reply = http.post("/v1/responses", json=body, headers={"authorization": "Bearer k"})
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert (
        error["code"] == "model_not_found"
        and "not supported with the Responses API" in error["message"]
    )


def test_a_recursive_schema_is_answered_with_a_small_object(http: httpx.Client) -> None:
    """vicentereig/dspy.rb's html_to_markdown_hierarchical_full cassette: a strict schema
    whose nodes hold lists of nodes, asked about several things (gpt-4o-mini: 200). The
    emulator filled each nested list with one node per thing named, at every level: about
    four to the ninth nodes, minutes of work and an answer of a hundred megabytes."""
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        },
        "required": ["name", "children"],
        "additionalProperties": False,
    }
    schema = {**node, "$defs": {"Node": node}}
    fmt = {"type": "json_schema", "json_schema": {"name": "tree", "strict": True, "schema": schema}}
    said = [{"role": "user", "content": "Outline Lima and Cusco."}]
    body = {"model": "gpt-4o-mini", "messages": said, "response_format": fmt}
    reply = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    assert reply.status_code == 200, reply.text[:300]
    tree = json.loads(reply.json()["choices"][0]["message"]["content"])

    def count(value: Any) -> int:
        kids = value.get("children") if isinstance(value, dict) else None
        return 1 + sum(count(kid) for kid in kids or [])

    assert 1 < count(tree) <= 30


def test_tool_results_in_consecutive_user_messages_answer_the_calls(http: httpx.Client) -> None:
    """patvice/ruby_llm-mcp's mixed_parameter_types cassette (claude-sonnet-4: 200): two calls
    answered in two user messages one after the other, which Anthropic reads as one turn; the
    library's rule (and so the emulator and the client's check) refused the first call as
    unanswered. A text between the two still leaves the second unanswered."""
    calls = [
        {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 5, "b": 7}},
        {"type": "tool_use", "id": "toolu_m", "name": "mul", "input": {"a": 3, "b": 4}},
    ]
    turns = [
        {"role": "user", "content": "Add 5 and 7, and multiply 3 by 4."},
        {"role": "assistant", "content": calls},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "12"}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_m", "content": "12"}],
        },
    ]
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("add", "mul")]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "tools": tools, "messages": turns}
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 200, reply.text[:300]
    turns.insert(3, {"role": "assistant", "content": "One more."})
    refused = http.post("/v1/messages", json=body, headers=headers)
    assert refused.status_code == 400, refused.text[:300]
    assert "toolu_m" in refused.json()["error"]["message"]


def test_a_null_stream_is_taken_by_responses(http: httpx.Client) -> None:
    """maybe-finance/maybe's test/vcr_cassettes/openai/chat/basic_response.yml and its other
    cassettes of the time: the Ruby client sent ``"stream": null`` (with a null instructions
    and previous_response_id) and OpenAI answered 200; the emulator refused it."""
    body = {
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Say yes."}],
        "instructions": None,
        "tools": [],
        "previous_response_id": None,
        "stream": None,
    }
    reply = http.post("/v1/responses", json=body, headers={"authorization": "Bearer k"})
    assert reply.status_code == 200, reply.text[:300]
    assert reply.json()["object"] == "response"


def _strict_tool(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }
    return {"name": name, "strict": True, "input_schema": schema}


NODE = {
    "type": "object",
    "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
    "required": ["next"],
    "additionalProperties": False,
}
STRICT_REFUSED = {
    # 0xPlaygrounds/rig's strict_schema_limits and strict_schema_matrix cassettes, and
    # vkryukov/req_llm's test/support/fixtures/anthropic/claude_3_5_haiku_20241022/
    # object_basic.json (an output_format with a minimum): 400, in these words
    "21 strict tools": (
        [_strict_tool(f"t{i}", {}, []) for i in range(21)],
        None,
        "Too many strict tools (21). The maximum number of strict tools supported is 20.",
    ),
    "17 union parameters": (
        [_strict_tool("u", {f"u{i}": {"type": ["string", "null"]} for i in range(17)}, [])],
        None,
        "Schemas contains too many parameters with union types (17 parameters",
    ),
    "25 optional parameters": (
        [
            _strict_tool("o1", {f"o{i}": {"type": "string"} for i in range(13)}, []),
            _strict_tool("o2", {f"o{i}": {"type": "string"} for i in range(12)}, []),
        ],
        None,
        "Schemas contains too many optional parameters (25)",
    ),
    "a recursive definition": (
        [
            {
                **_strict_tool("r", NODE["properties"], ["next"]),
                "input_schema": {**NODE, "$defs": {"Node": NODE}},
            }
        ],
        None,
        "tools.0.custom: Invalid schema: Circular reference detected in schema definitions: "
        "Node -> Node.",
    ),
    "a property that is true": (
        [_strict_tool("b", {"value": True}, ["value"])],
        None,
        "tools.0.custom: For 'object' type, property 'properties' is not supported",
    ),
    "a minimum in output_format": (
        None,
        {
            "type": "json_schema",
            "schema": _strict_tool("m", {"age": {"type": "integer", "minimum": 1}}, ["age"])[
                "input_schema"
            ],
        },
        "output_format.schema: For 'integer' type, property 'minimum' is not supported",
    ),
    # experientiallabs/experiential#804 (api.anthropic.com, a strict tool with maxItems)
    "a maxItems": (
        [_strict_tool("m", {"tags": {"type": "array", "maxItems": 3}}, ["tags"])],
        None,
        "tools.0.custom: For 'array' type, property 'maxItems' is not supported",
    ),
    # ghostlobster/memorize-everything#93
    "a minItems of 8": (
        [_strict_tool("m", {"cards": {"type": "array", "minItems": 8}}, ["cards"])],
        None,
        "tools.0.custom: For 'array' type, 'minItems' values other than 0 or 1 are not supported",
    ),
    "a maxLength": (
        [_strict_tool("m", {"note": {"type": "string", "maxLength": 800}}, ["note"])],
        None,
        "tools.0.custom: For 'string' type, property 'maxLength' is not supported",
    ),
    # strands-agents/harness-sdk#2664
    "a oneOf": (
        [_strict_tool("m", {"v": {"oneOf": [{"type": "string"}, {"type": "null"}]}}, ["v"])],
        None,
        "tools.0.custom: Schema type 'oneOf' is not supported",
    ),
}


@pytest.mark.parametrize("name", sorted(STRICT_REFUSED))
def test_anthropic_refuses_what_its_schema_compiler_refused(http: httpx.Client, name: str) -> None:
    """The emulator answered these 200 (it checked strict schemas for closed objects only)."""
    tools, output_format, said = STRICT_REFUSED[name]
    body: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": SAID}
    body.update({"tools": tools} if tools else {"output_format": output_format})
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    reply = http.post("/v1/messages", json=body, headers=headers)
    assert reply.status_code == 400, reply.text[:300]
    assert said in reply.json()["error"]["message"]


def test_anthropic_takes_strict_schemas_at_its_limits(http: httpx.Client) -> None:
    """rig's twenty_strict_tools_are_accepted, sixteen_union_parameters_across_tools and
    twenty_four_optional_parameters_across_tools (claude-sonnet-4-6: 200)."""
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    unions = {f"u{i}": {"type": ["string", "null"]} for i in range(8)}
    optional = {f"o{i}": {"type": "string"} for i in range(12)}
    for tools in (
        [_strict_tool(f"t{i}", {}, []) for i in range(20)],
        [_strict_tool("a", unions, list(unions)), _strict_tool("b", unions, list(unions))],
        [_strict_tool("a", optional, []), _strict_tool("b", optional, [])],
    ):
        body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": SAID, "tools": tools}
        reply = http.post("/v1/messages", json=body, headers=headers)
        assert reply.status_code == 200, reply.text[:300]


def test_the_chatgpt_model_takes_no_reasoning_effort(http: httpx.Client) -> None:
    """vkryukov/req_llm's test/support/fixtures/openai/gpt_5_chat_latest/reasoning_basic.json:
    OpenAI refused a reasoning effort for gpt-5-chat-latest (400), which the catalog said
    reasons; it answered the same model without one (basic.json: 200)."""
    body = {"model": "gpt-5-chat-latest", "input": "Solve 12*7.", "reasoning": {"effort": "low"}}
    reply = http.post("/v1/responses", json=body, headers={"authorization": "Bearer k"})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["param"] == "reasoning.effort"
    del body["reasoning"]
    assert http.post("/v1/responses", json=body, headers={"authorization": "Bearer k"}).is_success
    # pydantic/pydantic-ai's test_model_capabilities[gpt-5-chat-latest]: a temperature, 200
    warm = {**body, "temperature": 0.5}
    reply = http.post("/v1/responses", json=warm, headers={"authorization": "Bearer k"})
    assert reply.status_code == 200, reply.text[:300]


def test_a_deep_research_model_takes_its_hosted_tools_only(http: httpx.Client) -> None:
    """vkryukov/req_llm's test/support/fixtures/openai/o3_deep_research/multi_tool.json (in its
    history): OpenAI refused function tools beside web_search_preview for o3-deep-research
    (400); web_search_preview alone was answered (reasoning_basic.json: 200)."""
    search = {"type": "web_search_preview"}
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    body = {"model": "o3-deep-research", "input": "Weather in Paris?", "tools": [search, weather]}
    headers = {"authorization": "Bearer k"}
    reply = http.post("/v1/responses", json=body, headers=headers)
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["message"].startswith("Deep research models only support")
    assert reply.json()["error"]["param"] == "tools"
    body["tools"] = [search]
    assert http.post("/v1/responses", json=body, headers=headers).status_code == 200


def _png(pixel_bytes: int) -> str:
    """A 4 by 4 RGB PNG holding ``pixel_bytes`` bytes of pixel rows (52 make it whole)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(bytes(pixel_bytes)))
    png = b"\x89PNG\r\n\x1a\n" + header + pixels + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def test_a_png_whose_pixels_are_cut_short_is_refused(http: httpx.Client) -> None:
    """vicentereig/dspy.rb's openai_multimodal and anthropic_multimodal cassettes (in their
    history): a 16 by 16 PNG of a few bytes, refused by OpenAI (400 image_parse_error) and
    Anthropic (400 "Could not process image"); the emulator answered both. A whole one is
    taken."""
    for pixels, status in ((10, 400), (52, 200)):
        url = f"data:image/png;base64,{_png(pixels)}"
        said = [{"type": "image_url", "image_url": {"url": url}}]
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": said}]}
        reply = http.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
        assert reply.status_code == status, reply.text[:300]
        picture = {"type": "base64", "media_type": "image/png", "data": _png(pixels)}
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 20,
            "messages": [{"role": "user", "content": [{"type": "image", "source": picture}]}],
        }
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        answer = http.post("/v1/messages", json=body, headers=headers)
        assert answer.status_code == status, answer.text[:300]
        if status == 400:
            assert reply.json()["error"]["code"] == "image_parse_error"
            assert answer.json()["error"]["message"] == "Could not process image"


@pytest.mark.parametrize(
    ("model", "levels"),
    [
        ("gpt-5.2-pro", "'medium', 'high', 'xhigh'"),
        ("gpt-5.1-codex", "'low', 'medium', 'high'"),
        ("gpt-5.1-chat-latest", "'medium'"),
    ],
)
def test_the_models_that_always_reason_refuse_no_effort_and_a_temperature(
    http: httpx.Client, model: str, levels: str
) -> None:
    """pydantic/pydantic-ai's test_model_capabilities cassettes (in its history): GPT-5's pro
    and codex models and the chat models from 5.1 refused effort none (naming the levels they
    take) and a temperature (400); the emulator took both, as it did for gpt-5.1 itself."""
    headers = {"authorization": "Bearer k"}
    body: dict[str, Any] = {"model": model, "input": "Hi.", "reasoning": {"effort": "none"}}
    reply = http.post("/v1/responses", json=body, headers=headers)
    assert reply.status_code == 400, reply.text[:300]
    assert f"Supported values are: {levels}." in reply.json()["error"]["message"].replace(
        ", and", ","
    ).replace(" and '", ", '")
    reply = http.post(
        "/v1/responses", json={**body, "reasoning": None, "temperature": 0.5}, headers=headers
    )
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["param"] == "temperature"


def test_gpt_5_3_codex_may_stop_reasoning(http: httpx.Client) -> None:
    """pydantic/pydantic-ai's test_reasoning_flags_match_the_api[gpt-5.3-codex]: effort none
    and a temperature, both answered 200, unlike gpt-5.1-codex."""
    headers = {"authorization": "Bearer k"}
    for extra in ({"reasoning": {"effort": "none"}}, {"temperature": 0.5}):
        body = {"model": "gpt-5.3-codex", "input": "Hi.", **extra}
        reply = http.post("/v1/responses", json=body, headers=headers)
        assert reply.status_code == 200, reply.text[:300]
