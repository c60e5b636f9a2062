"""json_limits.loads: pydantic_core's parser first, Python's json for what it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.wire import json_limits

_numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    st.none() | st.booleans() | _numbers | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


@settings(deadline=None)
@given(value=_json, ascii_only=st.booleans())
def test_reads_what_json_reads(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert json_limits.loads(text) == json.loads(text)
    assert json_limits.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "a\\ud83d", "\\ude00b"])
def test_lone_surrogate_escapes_still_parse_as_json_reads_them(escape: str) -> None:
    text = f'{{"t": "{escape}"}}'
    assert json_limits.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["\ud83d", '{"t": "\ud800"}', '"a\udfffb"'])
def test_text_holding_a_lone_surrogate_itself_reads_as_json_reads_it(text: str) -> None:
    """Not an escape but the code point itself (a str no UTF-8 can encode): what Python's json
    makes of it, or a ValueError, never the TypeError the fast parser raises."""
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            json_limits.loads(text)
    else:
        assert json_limits.loads(text) == expected


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', "[-Infinity]", "NaN"])
def test_nan_and_infinity_are_refused(text: str) -> None:
    with pytest.raises(json_limits.JSONLimitError):
        json_limits.loads(text)


@pytest.mark.parametrize("depth", [101, 150, 250, 10_000])
def test_nesting_past_the_limit_is_refused_at_any_depth(depth: int) -> None:
    with pytest.raises(json_limits.JSONLimitError, match="nested deeper than 100"):
        json_limits.loads("[" * depth + "]" * depth)
    assert json_limits.loads("[" * 100 + "]" * 100) is not None


@pytest.mark.parametrize(
    "text", ['{"a": 1', '{"a": "x\ny"}', '{"a": 1} x', "", "{'a': 1}", b'{"a": "\xff"}']
)
def test_what_is_not_json_is_a_value_error(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        json_limits.loads(text)


def test_a_bom_is_skipped() -> None:
    assert json_limits.loads('\ufeff{"a": 1}') == {"a": 1}
    assert json_limits.loads(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


def test_a_batch_results_line_past_the_limits_is_that_lines_fault() -> None:
    # json.loads raised a bare RecursionError on a deep line, and invalid UTF-8 a bare
    # UnicodeDecodeError, out of a batch's results download. A line past the limits is its
    # item's fault (the others read); a file that is not UTF-8 is a ProtocolError.
    from metis.errors import ProtocolError
    from metis.wire.batches import RawItem, jsonl

    def read(line: dict[str, object]) -> RawItem:
        return RawItem("k", "succeeded", line)

    deep = b"[" * 100_000 + b"]" * 100_000
    good, too_deep = jsonl(b'{"a": 1}\n' + deep + b"\n", "batch output", read)
    assert good.body == {"a": 1} and good.fault is None
    assert too_deep.custom_id == "" and "line 2: not JSON" in str(too_deep.fault)
    (nan,) = jsonl(b'{"custom_id": "n", "a": NaN}\n', "batch output", read)
    assert nan.custom_id == "n" and "line 1: not JSON" in str(nan.fault)
    with pytest.raises(ProtocolError, match="batch output is not UTF-8"):
        jsonl(b'{"a": "\xff"}\n', "batch output", read)


def test_a_nova_code_result_too_deep_to_read_is_left_unread() -> None:
    from metis.wire.bedrock_converse.server_tools import result_block

    deep = "[" * 100_000 + "]" * 100_000
    result = {
        "toolUseId": "t1",
        "type": "nova_code_interpreter_result",
        "content": [{"text": deep}],
    }
    block = result_block(result, {"t1": "code_execution"})
    assert block.code_output is None


def test_text_only_refuses_a_lone_surrogate_and_keeps_a_pair() -> None:
    from metis.wire.json_limits import LoneSurrogateError, loads

    assert loads(b'{"a": "\\ud83d\\ude00"}', text_only=True) == {"a": "\U0001f600"}
    assert loads(b'{"a": "\\ud800"}') == {"a": "\ud800"}  # read as it is, unless asked
    for document in (b'{"a": ["x\\ud800"]}', b'{"\\udfff": 1}', b'"\\udc00"'):
        with pytest.raises(LoneSurrogateError):
            loads(document, text_only=True)


def test_json_copy_is_a_deep_copy_of_a_json_value() -> None:
    """A tool schema copied for a request: equal, and nothing of the copy shared with the
    original but what cannot change (a value of another kind is deep-copied too)."""
    import datetime

    from metis.wire.json_limits import json_copy

    when = [datetime.date(2026, 1, 1)]
    schema = {"type": "object", "properties": {"a": {"enum": [1, 2.5, None, True]}}, "x": when}
    copied = json_copy(schema)
    assert copied == schema
    copied["properties"]["a"]["enum"].append("more")
    copied["x"].append("more")
    assert schema["properties"]["a"]["enum"] == [1, 2.5, None, True]  # type: ignore[index]
    assert when == [datetime.date(2026, 1, 1)]
    assert json_copy("text") == "text" and json_copy(None) is None


def test_json_copy_keeps_exact_types_and_shares_nothing_that_can_change() -> None:
    """Written and read back: ``1`` stays an int, ``1.0`` a float, ``True`` a bool, keys in
    their order; a value marshal cannot write (a ``str`` enum) is walked, and kept as it is."""
    import enum

    from metis.wire.json_limits import json_copy

    class Unit(enum.StrEnum):
        C = "celsius"

    twice = {"type": "integer"}
    schema = {"b": [1, 1.0, True, None, -0.0], "a": {"x": twice, "y": twice}}
    copied = json_copy(schema)
    assert copied == schema and list(copied) == ["b", "a"]
    assert [type(v) for v in copied["b"]] == [int, float, bool, type(None), float]
    assert copied["a"]["x"] is not twice and copied["a"]["x"] is not copied["a"]["y"]
    copied["a"]["x"]["type"] = "string"
    assert twice == {"type": "integer"} and copied["a"]["y"] == {"type": "integer"}
    walked = json_copy({"enum": [Unit.C]})
    assert walked == {"enum": [Unit.C]} and walked["enum"][0] is Unit.C
