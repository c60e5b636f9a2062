"""Each wire decoder under malformed and adversarial provider output: a recorded reply (whole
and streamed, from cassettes/) with one value anywhere in it replaced (a wrong type at any
level, deep nesting, huge numbers, lone surrogates, empty and long strings) or removed, and
error answers of any status, headers and bytes. Reading one either works or raises a
classified metis error (an AdapterError: ProtocolError for a malformed reply), never a bare
TypeError or KeyError. The search's size: tests/conftest.py (METIS_FULL_SEARCH)."""

from __future__ import annotations

import contextlib
import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metis.errors import AdapterError, ProtocolError
from metis.stacks.loader import load_stack
from metis.wire.codec import Codec, get_codec
from metis.wire.response_reader import ResponseReader
from tests.json_mutation import changed, paths

CASSETTES = Path(__file__).parents[2] / "cassettes"
CODECS = {  # cassette folder -> codec
    "anthropic": "anthropic",
    "openai": "openai_chat",
    "openai_responses": "openai_responses",
    "gemini": "gemini",
    "ollama": "ollama",
}


class Context:
    provider, model, request_id, session_id = "p", "m", "req_1", None
    secrets: tuple[str, ...] = ()

    def warn_dropped(self, *args: Any, **extra: Any) -> None:
        pass


@cache
def codec(name: str) -> Codec:
    if name != "gemini":
        return get_codec(name)
    (normalize,) = [s for s in load_stack("gemini").stages if s.name == "normalize"]
    return get_codec("schema", normalize.options["settings"])


def recorded(folder: str, name: str) -> str:
    document = yaml.safe_load((CASSETTES / folder / name).read_text())
    return "".join(document["interactions"][0]["response"]["chunks"])


@cache
def seeds(folder: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded whole reply, and the objects of the streamed one."""
    body = json.loads(recorded(folder, "tool_call.yaml"))
    objects = []
    for line in recorded(folder, "tool_call_stream.yaml").splitlines():
        data = line.strip().removeprefix("data:").strip()
        if data.startswith("{"):
            objects.append(json.loads(data))
    return body, objects


ODD = st.sampled_from(
    [
        *(10**400, -(2**63), 1e308, -1, 0, "", " ", "\ud800", "\udfff x", "a" * 100_000),
        *("{", "null", "[]", "{}", "1e999", "end_turn", "tool_calls", "function_call"),
    ]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | ODD,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "text", "id", "index", "delta"]), inner, max_size=3
        )
    ),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    at = draw(st.sampled_from(list(paths(seed))[1:]))
    remove = draw(st.booleans())
    return changed(seed, at, None if remove else draw(VALUES), remove=remove)


def reader(folder: str) -> ResponseReader:
    return ResponseReader(codec(CODECS[folder]), Context(), request_body={"model": "m"})


@pytest.mark.parametrize("folder", sorted(CODECS))
def test_the_seeds_read(folder: str) -> None:
    body, objects = seeds(folder)
    assert reader(folder).body(body)
    streamed = reader(folder)
    assert [event for obj in objects for event in streamed.feed(obj)] + list(streamed.finish())


@pytest.mark.parametrize("folder", sorted(CODECS))
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_malformed_whole_reply_is_read_or_a_classified_error(
    folder: str, data: st.DataObject
) -> None:
    body = data.draw(mutated(seeds(folder)[0]))
    with contextlib.suppress(AdapterError):
        reader(folder).body(body)


@pytest.mark.parametrize("folder", sorted(CODECS))
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_malformed_stream_is_read_or_a_classified_error(folder: str, data: st.DataObject) -> None:
    objects = data.draw(mutated(seeds(folder)[1]))
    streamed = reader(folder)
    try:
        for obj in objects:
            if isinstance(obj, dict):
                streamed.feed(obj)
        streamed.finish()
    except AdapterError:
        pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | ODD,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["error", "message", "type", "code", "status", "details", "retryDelay"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=8,
)
BODIES = st.one_of(
    st.binary(max_size=64),
    JSON.map(lambda value: json.dumps(value).encode("utf-8", "surrogatepass")),
    st.sampled_from([b"\xff\xfe", b"[" * 50_000, b'{"error":' * 3_000, b'{"error": 1e999}']),
)
HEADER_VALUES = st.text(max_size=12) | st.sampled_from(["1e999", "-1", "nan", "9" * 30])


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    name=st.sampled_from([*sorted(set(CODECS.values())), "bedrock_converse"]),
    status=st.sampled_from([400, 401, 403, 404, 408, 413, 422, 429, 500, 503, 504, 529, 599]),
    body=BODIES,
    headers=st.dictionaries(
        st.sampled_from(["retry-after", "retry-after-ms", "content-type", "x-request-id"]),
        HEADER_VALUES,
        max_size=3,
    ),
)
def test_an_error_answer_of_any_shape_is_classified(
    name: str, status: int, body: bytes, headers: dict[str, str]
) -> None:
    error = codec(name).error_from_http(status, headers, body)
    assert isinstance(error, AdapterError)
    assert str(error)


@pytest.mark.parametrize("item_id", [[], {"a": 1}, 7])
def test_a_responses_item_id_that_is_not_a_string_is_a_protocol_error(item_id: Any) -> None:
    """Found by the search above: a list as an item's id was a bare TypeError (unhashable)."""
    body = copy.deepcopy(seeds("openai_responses")[0])
    body["output"][0]["id"] = item_id
    with pytest.raises(ProtocolError, match=r"output\[\]\.id"):
        reader("openai_responses").body(body)
    objects = copy.deepcopy(seeds("openai_responses")[1])
    added = next(o for o in objects if o.get("type") == "response.output_item.added")
    added["item"]["id"] = item_id
    streamed = reader("openai_responses")
    with pytest.raises(ProtocolError, match=r"item\.id"):
        for obj in objects:
            streamed.feed(obj)


def test_a_chat_chunk_whose_other_choice_is_not_an_object_is_a_protocol_error() -> None:
    """Found by the search above in CI: a chunk whose first choice has another index and whose
    next is a list (not a choice object) was a bare AttributeError."""
    first, *rest = seeds("openai")[1]
    odd = copy.deepcopy(rest[0])
    odd["choices"] = [{**odd["choices"][0], "index": 5}, ["not a choice"]]
    streamed = reader("openai")
    streamed.feed(first)
    with pytest.raises(ProtocolError, match=r"choices\[1\]"):
        streamed.feed(odd)
