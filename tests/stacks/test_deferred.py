"""An adapter of built-in stages builds its pipeline on first use (metis/stacks/deferred.py):
every error building it would raise is still raised when the adapter is built, and the
pipeline it builds later is the one it would have built at once."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from metis import AdapterConfig
from metis.adapter import Adapter, build_adapter
from metis.errors import ConfigError, StackError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.pipeline.registry import StageRegistry
from metis.pipeline.registry import stages as registry
from metis.pipeline.request import WireRequest
from metis.pipeline.skeleton import ZONES
from metis.pipeline.stage import RequestStage, Stage, _defaults_only
from metis.stacks.deferred import (
    _PACKAGED_SETTINGS,
    CONTINUING_CODECS,
    DECLARED,
    checked_without_code,
)
from metis.stacks.loader import _parsed_builtin, builtin_stacks, load_stack, parse_stack
from metis.wire.codec import _LAZY, check_codec_settings, get_codec

BASE: dict[str, Any] = {
    "name": "base",
    "codec": "anthropic",
    "framing": "sse",
    "endpoint": {"base_url": "http://localhost:1", "path": "/v1/messages"},
    "auth": {"header": "x-api-key", "env": "BASE_KEY"},
    "stages": ["capability_check", {"tool_ids": {"prefix": "toolu_"}}, "cache_control"],
}


def stack(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


def adapter_of(data: dict[str, Any], reg: StageRegistry = registry) -> Adapter:
    return Adapter(parse_stack(data, "<test>", reg), AdapterConfig(api_key="x"), registry=reg)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_declaration_speaks_for_its_stage_class(name: str) -> None:
    declared, cls = DECLARED[name], registry.get(name)
    if declared.options is None:  # its defaults, and nothing its constructor could refuse
        assert _defaults_only(cls.Options)
        cls()
    else:
        assert cls.Options is declared.options
    assert cls.dialect_option == declared.dialect_option
    for options in ({}, {"codec": "openai_chat"}, {"rules": "gemini"}, {"rules": "openai_chat"}):
        expected = cls.dialect(options) if cls.dialect_option else None
        got = declared.dialect(options) if declared.dialect else None
        assert got == expected


# What each zone's stages take and give (the four parameters of Stage; Any: untouched).
ZONE_SIGNATURES: dict[int, set[tuple[Any, ...]]] = {
    0: {(Any, Any, StreamEvent, StreamEvent)},
    1: {
        (CanonicalRequest, CanonicalRequest, Any, Any),
        (CanonicalRequest, CanonicalRequest, StreamEvent, StreamEvent),
        (Any, Any, StreamEvent, StreamEvent),
    },
    2: {(CanonicalRequest, WireRequest, Any, Any)},
    3: {(WireRequest, WireRequest, Any, Any), (WireRequest, WireRequest, StreamEvent, StreamEvent)},
    4: {(Any, Any, StreamEvent, StreamEvent)},
    6: {(WireRequest, WireRequest, StreamEvent, StreamEvent)},
    7: {(WireRequest, WireRequest, dict[str, Any], StreamEvent)},
}


@pytest.mark.parametrize("name", sorted(set(DECLARED) - {"decode", "transport"}))
def test_a_declared_stage_takes_and_gives_what_its_zone_does(name: str) -> None:
    """Why the deferred check need not check types: in a stack whose zones are in order and
    whose skeleton is whole, stages like these always fit (decode and transport are the
    skeleton's own, one each)."""
    signature = tuple(registry.get(name).signature())
    assert signature in ZONE_SIGNATURES[ZONES[name]]


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai_responses", "gemini", "ollama"])
def test_a_built_in_stack_is_checked_now_and_built_on_first_use(name: str) -> None:
    adapter = build_adapter(name, AdapterConfig(api_key="x"))
    assert adapter._pipeline is None
    assert repr(adapter) == f"<Adapter {name}: {' -> '.join(s.name for s in adapter.stack.stages)}>"
    built = adapter.pipeline
    assert adapter.pipeline is built
    at_once = adapter.stack.build_pipeline()
    assert built.names() == at_once.names()
    assert [s.options for s in built] == [s.options for s in at_once]
    assert built.services is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stages": [{"tool_ids": {"prefx": "x"}}]}, "unknown option 'prefx'"),
        ({"stages": ["tool_ids", {"cache_control": {"ttl": "2h"}}]}, "option 'ttl'"),
        ({"stages": ["tool_ids", {"schema_cleanup": {"remove": "x"}}]}, "option 'remove'"),
        ({"stages": ["tool_ids", {"thinking_filter": {"nonesuch": 1}}]}, "option 'nonesuch'"),
        ({"codec": "nonesuch"}, "unknown codec 'nonesuch'"),
        ({"codec_settings": {"nonesuch": 1}}, "codec 'anthropic' takes no settings"),
        ({"stages": ["tool_ids", "tool_ids"]}, "two stages are named 'tool_ids'"),
        ({"codec": "openai_responses", "codec_settings": {"store": "yes"}}, "store is one of"),
        ({"codec": "schema", "codec_settings": {"name": "x", "nonesuch": 1}}, "nonesuch"),
        (
            {"codec": "schema", "codec_settings": {"response_schema": {"content_path": "a..b"}}},
            "not a dot path",
        ),
        ({"codec": "openai_responses", "codec_settings": {"stor": True}}, "unknown setting"),
        ({"stages": ["tool_ids", "continuation"]}, "has no output_items"),
    ],
)
def test_what_is_wrong_with_a_stack_is_still_an_error_when_the_adapter_is_built(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(StackError, match=message):
        adapter_of(stack(**change))


def test_the_codec_settings_of_every_built_in_stack_file_are_valid() -> None:
    """What lets a stack giving a built-in file's own codec settings have them checked by its
    codec on first use instead of when the adapter is built (metis/stacks/deferred.py)."""
    for name in builtin_stacks():
        _parsed_builtin(name)
    assert {codec for codec, _ in _PACKAGED_SETTINGS} == {
        "schema",
        "openai_responses",
        "openai_chat",
    }
    for codec, settings in _PACKAGED_SETTINGS:
        check_codec_settings(codec, settings)


def test_a_built_in_stacks_codec_settings_changed_are_checked_when_the_adapter_is_built() -> None:
    gemini = load_stack("gemini")
    assert gemini.codec_settings
    for change, message in (
        ({"nonesuch": 1}, "nonesuch"),
        ({"response_schema": {"content_path": "a..b"}}, "not a dot path"),
    ):
        with pytest.raises(StackError, match=message):
            adapter_of(stack(codec="schema", codec_settings={**gemini.codec_settings, **change}))
    deferred = adapter_of(stack(codec="schema", codec_settings=dict(gemini.codec_settings)))
    assert deferred._pipeline is None
    assert deferred.pipeline.names() == deferred.stack.build_pipeline().names()


def test_a_stack_without_the_whole_skeleton_is_built_at_once() -> None:
    spec = parse_stack(stack(), "<test>")
    entries = [entry for entry in spec.stages if entry.name != "normalize"]
    assert checked_without_code(spec.stages, registry)
    assert not checked_without_code(entries, registry)


def test_a_stack_with_a_stage_of_the_applications_is_built_at_once() -> None:
    class Shout(RequestStage[CanonicalRequest]):
        name = "shout"

        def rewrite(self, request: CanonicalRequest, call: Any) -> CanonicalRequest:
            return request

    own = StageRegistry(dict(registry._lazy))
    own.register(Shout)
    adapter = adapter_of(stack(stages=["shout", {"tool_ids": {"prefix": "toolu_"}}]), own)
    assert adapter._pipeline is not None
    assert "shout" in adapter.pipeline


def test_a_built_in_replaced_by_the_applications_class_is_built_at_once() -> None:
    class MyToolIds(Stage[Any, Any, Any, Any]):
        name = "tool_ids"

    own = StageRegistry(dict(registry._lazy))
    own.register(MyToolIds)
    assert not own.is_builtin("tool_ids")
    with pytest.raises(StackError):  # its own class refuses the built-in's option
        adapter_of(stack(), own)


def test_telemetry_set_before_the_first_use_reaches_the_stages_built_then() -> None:
    adapter = build_adapter("anthropic", AdapterConfig(api_key="x"))
    sink = typing.cast(Any, object())
    adapter.telemetry = sink
    assert adapter._pipeline is None
    assert adapter.pipeline.services is not None
    assert adapter.pipeline.services.telemetry is sink


@pytest.mark.parametrize("name", sorted(_LAZY))
def test_continuation_is_deferred_only_over_the_codecs_whose_items_it_reads(name: str) -> None:
    try:
        codec = get_codec(name)
    except StackError:  # a codec its stack configures: none of them has items to continue
        assert name not in CONTINUING_CODECS
        return
    assert callable(getattr(codec, "output_items", None)) == (name in CONTINUING_CODECS)


@pytest.mark.parametrize("name", builtin_stacks())
def test_every_built_in_stack_deferred_builds_its_pipeline_when_first_used(name: str) -> None:
    try:
        adapter = build_adapter(name, AdapterConfig(api_key="x"))
    except ConfigError:  # a stack that needs settings of its own (a region, a project)
        return
    deferred = adapter._pipeline is None
    assert adapter.pipeline.names() == adapter.stack.build_pipeline().names()
    assert deferred == (name not in BUILT_AT_ONCE)


BUILT_AT_ONCE = {  # stages without a declaration: the auth steps, tool_shim, the WebSocket mode
    *("azure", "azure_responses", "azure_responses_ws", "openai_responses_ws"),
    *("bedrock", "bedrock_anthropic", "bedrock_mantle", "vertex", "vertex_anthropic", "tgi"),
}
