"""A canonical object refuses a field it does not have, naming it and the nearest it has
(docs/contract.md §14); what metis itself writes reads back equal."""

from __future__ import annotations

import base64
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from metis.core.model_fields import fields_at, with_hints
from metis.cost import Cost
from metis.model import (
    AudioBlock,
    Base64ImageSource,
    CacheHint,
    CanonicalRequest,
    CanonicalResponse,
    Citation,
    Compaction,
    DocumentBlock,
    DroppedContent,
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
    RedactedThinkingBlock,
    Role,
    StopKind,
    StopReason,
    TextBlock,
    TextSpan,
    ThinkingBlock,
    ThinkingConfig,
    TokenUsage,
    ToolAnnotations,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.server_tools import (
    CodeOutput,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
    WebSearch,
)
from metis.stacks.loader import StageEntry

SAID = [Message.user("hi")]
MODEL = "anthropic:claude-sonnet-4-5"
ZERO = Decimal(0)
COST = Cost(
    model=MODEL,
    usd=ZERO,
    input_usd=ZERO,
    output_usd=ZERO,
    cached_input_usd=ZERO,
    cache_creation_usd=ZERO,
    pricing_version="v",
)

MISSPELT: list[tuple[Callable[[], object], str, str]] = [
    # (a construction with one misspelt field, the field, the name it meant)
    (
        lambda: CanonicalRequest(model=MODEL, messages=SAID, max_output_tokens=9, temprature=0.5),
        "temprature",
        "temperature",
    ),
    (
        lambda: ToolDefinition(
            name="f", description="d", input_schema={"type": "object"}, stric=True
        ),
        "stric",
        "strict",
    ),
    (lambda: ToolAnnotations(read_olny=True), "read_olny", "read_only"),
    (lambda: ToolChoice(type="tool", nmae="f"), "nmae", "name"),
    (lambda: ThinkingConfig(effort="high", sumary="auto"), "sumary", "summary"),
    (lambda: Compaction(trigger_tokens=9, instruction="x"), "instruction", "instructions"),
    (lambda: Message(role=Role.USER, content="x", cahce=None), "cahce", "cache"),
    (lambda: TextBlock(text="x", citation=[]), "citation", "citations"),
    (lambda: ImageBlock.from_url("https://x/y.png", detial="high"), "detial", "type"),
    (lambda: Base64ImageSource(media_typ="image/png", data="AA=="), "media_typ", "media_type"),
    (lambda: URLImageSource(url="https://x", ulr="https://y"), "ulr", "url"),
    (lambda: ToolUseBlock(id="tu_1", name="f", inputs={}), "inputs", "input"),
    (lambda: ToolResultBlock(tool_use_id="tu_1", is_eror=True), "is_eror", "is_error"),
    (lambda: ThinkingBlock(thinking="x", signatur="s"), "signatur", "signature"),
    (lambda: RedactedThinkingBlock(data="x", dat="y"), "dat", "data"),
    (lambda: ProviderRaw(provider="anthropic", modle="m"), "modle", "model"),
    (lambda: DocumentBlock.from_text("x", titel="t"), "titel", "title"),
    (lambda: ServerToolCallBlock(id="s", name="web_search", inpt={}), "inpt", "input"),
    (lambda: SearchResult(url="https://x", titel="t"), "titel", "title"),
    (lambda: CodeOutput(stdot="x"), "stdot", "stdout"),
    (lambda: StopReason(kind=StopKind.END_TURN, rwa="x"), "rwa", "raw"),
    (lambda: TokenUsage(input_token=1), "input_token", "input_tokens"),
    (
        lambda: DroppedContent(block_type="x", reason="y", provider="p", repeat=True),
        "repeat",
        "repeated",
    ),
    (lambda: Citation(kind="url", url="https://x", titel="t"), "titel", "title"),
    (lambda: WebSearch(max_use=3), "max_use", "max_uses"),
]


@pytest.mark.parametrize(("build", "field", "meant"), MISSPELT)
def test_a_misspelt_field_is_refused_naming_it_and_the_nearest(
    build: Callable[[], object], field: str, meant: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        build()
    said = str(caught.value)
    assert f"{field}\n  Extra inputs are not permitted" in said
    if build.__code__.co_names[-1:] != ("from_url",):  # an image has no field near 'detial'
        assert f"did you mean {meant!r}" in said


def test_metis_own_records_refuse_an_unknown_field_too() -> None:
    with pytest.raises(ValidationError, match="option\n  Extra inputs are not permitted"):
        StageEntry(name="x", option={})  # a stack file's keys are named as config errors
    with pytest.raises(ValidationError, match="cents\n  Extra inputs are not permitted"):
        Cost(**{**COST.model_dump(), "cents": 1})


def test_a_misspelt_key_of_a_nested_dict_is_refused_naming_its_place() -> None:
    with pytest.raises(ValidationError) as caught:
        Message(
            role=Role.USER,
            content=[{"type": "image", "source": {"type": "url", "url": "https://x", "ulr": 1}}],
        )
    assert "content.0.image.source.url.ulr" in str(caught.value)
    assert "did you mean 'url'?" in str(caught.value)


def test_an_unknown_field_far_from_every_known_one_is_refused_without_a_guess() -> None:
    with pytest.raises(ValidationError) as caught:
        TextBlock(text="x", zzzzzz=1)
    assert "zzzzzz\n  Extra inputs are not permitted" in str(caught.value)
    assert "did you mean" not in str(caught.value)


def test_other_errors_keep_their_kind_and_context_beside_a_hint() -> None:
    with pytest.raises(ValidationError) as caught:
        TokenUsage(input_tokens=-1, output_token=2)
    kinds = {error["type"]: error for error in caught.value.errors()}
    assert kinds["greater_than_equal"]["ctx"] == {"ge": 0}
    assert "did you mean 'output_tokens'" in kinds["extra_forbidden"]["msg"]


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ((), set(CanonicalRequest.model_fields)),
        (("messages", 0), set(Message.model_fields)),
        (("messages", 0, "content", 2, "tool_use"), set(ToolUseBlock.model_fields)),
        (("messages", 0, "content", 0, "text", "provider_raw"), set(ProviderRaw.model_fields)),
        (("thinking",), set(ThinkingConfig.model_fields)),
        (("server_tools", 0, "web_search"), set(WebSearch.model_fields)),
        (("provider_options", "openai"), set()),  # a dict of anything: no fields to name
    ],
)
def test_the_fields_taken_at_a_place_follow_lists_unions_and_their_tags(
    path: tuple[str | int, ...], fields: set[str]
) -> None:
    assert set(fields_at(CanonicalRequest, path)) == fields


def test_the_fields_of_a_tool_results_part_are_found_past_its_unions_label() -> None:
    path = ("content", 0, "tool_result", "content", "list[tagged-union[...]]", 0, "text")
    assert set(fields_at(Message, path)) == set(TextBlock.model_fields)


def test_an_error_with_no_unknown_field_is_left_as_it_is() -> None:
    with pytest.raises(ValidationError) as caught:
        TokenUsage(input_tokens="many")
    assert with_hints(caught.value, TokenUsage) is caught.value


# What metis writes reads back -----------------------------------------------------------------

RAW = ProviderRaw(provider="anthropic", model="claude-sonnet-4-5", data={"x": [1, {"y": None}]})
PNG = base64.b64encode(b"\x89PNG").decode()
CONVERSATION = [
    Message.system("Be brief."),
    Message(
        role=Role.USER,
        id="m1",
        cache=CacheHint(),
        content=[
            TextBlock(text="Look:", cache=CacheHint(ttl="1h")),
            ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
            ImageBlock.from_url("https://example.com/a.png"),
            DocumentBlock.from_text("notes", title="n.txt", context="c", citations=True),
            DocumentBlock.from_url("https://example.com/a.pdf"),
            DocumentBlock.from_file_id("file_1", provider="openai", media_type="application/pdf"),
            AudioBlock.from_bytes(b"RIFF", "audio/wav"),
        ],
    ),
    Message(
        role=Role.ASSISTANT,
        content=[
            ThinkingBlock(thinking="hmm", signature="sig", provider_raw=RAW),
            RedactedThinkingBlock(data="enc", provider_raw=RAW),
            TextBlock(
                text="Said.",
                citations=[Citation(kind="url", url="https://x", span=TextSpan(start=0, end=4))],
            ),
            ServerToolCallBlock(id="srv_1", name="web_search", input={"q": "x"}, provider_raw=RAW),
            ServerToolResultBlock(
                tool_call_id="srv_1",
                name="web_search",
                search_results=[SearchResult(url="https://x", title="X", page_age="1d")],
                provider_raw=RAW,
            ),
            ServerToolResultBlock(
                tool_call_id="srv_2", name="code_execution", code_output=CodeOutput(stdout="1")
            ),
            ToolUseBlock(id="tu_1", name="f", input={"a": 1}, input_error="cut", provider_raw=RAW),
            OpaqueBlock(kind="compaction", provider_raw=RAW),
        ],
    ),
    Message.tool(
        ToolResultBlock(tool_use_id="tu_1", content=[TextBlock(text="ok")], is_error=True)
    ),
]


@pytest.mark.parametrize(
    "dump",
    [
        lambda m: m.model_dump(),
        lambda m: m.model_dump(mode="json"),
        lambda m: m.model_dump(mode="json", exclude_none=True),  # the gateway's Redis store
    ],
)
def test_every_block_dumped_by_metis_reads_back_equal(dump: Callable[[BaseModel], Any]) -> None:
    for message in CONVERSATION:
        assert Message.model_validate(dump(message)) == message


def test_a_request_and_a_response_dumped_read_back_equal() -> None:
    request = CanonicalRequest(
        model=MODEL,
        messages=CONVERSATION,
        max_output_tokens=100,
        tools=[ToolDefinition(name="f", annotations=ToolAnnotations(read_only=True))],
        server_tools=[WebSearch(max_uses=2)],
        tool_choice=ToolChoice.tool("f"),
        thinking="high",
        compaction=Compaction(trigger_tokens=1000),
    )
    assert CanonicalRequest.model_validate(request.model_dump()) == request
    assert CanonicalRequest.model_validate_json(request.model_dump_json()) == request
    response = CanonicalResponse(
        request_id="req_1",
        model=MODEL,
        provider="anthropic",
        content=CONVERSATION[2].content,
        stop_reason=StopReason(kind=StopKind.TOOL_USE, raw="tool_use"),
        usage=TokenUsage(input_tokens=3, reasoning_tokens=1, output_tokens=2),
        latency_ms=5,
        warnings=[DroppedContent(block_type="x", reason="y", provider="p")],
    )
    assert CanonicalResponse.model_validate_json(response.model_dump_json()) == response
    assert Cost.model_validate(COST.model_dump()) == COST


def test_a_response_dumped_before_stop_reasons_had_a_sequence_reads_back() -> None:
    """A reply kept as JSON by an application (a cache, a log) before ``StopReason.sequence``
    existed reads as one that names no stop sequence; one that names it reads back equal."""
    ended = StopReason(kind=StopKind.STOP_SEQUENCE, raw="stop_sequence", sequence="END")
    response = CanonicalResponse(
        request_id="req_1",
        model=MODEL,
        provider="anthropic",
        content=[],
        stop_reason=ended,
        usage=TokenUsage(),
        latency_ms=5,
    )
    assert CanonicalResponse.model_validate_json(response.model_dump_json()) == response
    before = response.model_dump(mode="json")
    del before["stop_reason"]["sequence"]
    read = CanonicalResponse.model_validate(before)
    assert read.stop_reason == StopReason(kind=StopKind.STOP_SEQUENCE, raw="stop_sequence")
    assert read.stop_reason.sequence is None


def test_a_copy_with_changed_fields_still_works() -> None:
    request = CanonicalRequest(model=MODEL, messages=SAID, max_output_tokens=9)
    changed = request.model_copy(update={"temperature": 0.5, "model": "openai:gpt-4o"})
    assert (changed.temperature, changed.model) == (0.5, "openai:gpt-4o")
    assert CanonicalRequest.model_validate(changed.model_dump()) == changed


@pytest.mark.parametrize("field", ["provider_options", "extra_headers", "extra_query"])
def test_a_per_provider_field_given_at_the_top_says_it_is_keyed_by_provider(field: str) -> None:
    """Before, ``extra_headers={"x-trace": "1"}`` was pydantic's "Input should be a valid
    dictionary" at ``extra_headers.x-trace``, which did not say what the keys are."""
    with pytest.raises(ValidationError, match=rf"{field} is keyed by provider.*'x-trace' is '1'"):
        CanonicalRequest(
            model="anthropic:claude-sonnet-4-5",
            messages=[Message.user("Hi")],
            max_output_tokens=64,
            **{field: {"x-trace": "1"}},
        )
    kept = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("Hi")],
        max_output_tokens=64,
        **{field: {"anthropic": {"x-trace": "1"}}},
    )
    assert getattr(kept, field) == {"anthropic": {"x-trace": "1"}}
