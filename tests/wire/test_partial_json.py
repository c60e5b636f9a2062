"""partial_json: what parses cleanly from a truncated JSON object (docs/contract.md §2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metis.wire.partial_json import parse_object, parse_partial_object

# A nested document whose strings hold the characters the scanner must not be fooled by.
DOCUMENT: dict[str, Any] = {
    "path": 'dir/a, "b" {c} [d].txt',
    "escaped": 'back\\slash \\" quote, "inner, comma"',
    "list": [1, [2, 3, [4, "]"]], {"x": "}", "y": [None, True, False]}],
    "obj": {"k": "v, w", "n": None, "deep": {"e": [1.5, -2e3, "\\u00e9"]}},
    "unicode": "naïve ☃ 日本",
    "n": 12345,
    "t": True,
    "empty": {},
    "nothing": [],
}
TEXTS = [
    json.dumps(DOCUMENT),
    json.dumps(DOCUMENT, indent=2),
    json.dumps(DOCUMENT, separators=(",", ":"), ensure_ascii=False),
]


def _assert_complete_members_only(got: dict[str, Any], whole: dict[str, Any]) -> None:
    """``got`` holds a prefix of ``whole``'s members, each with its complete value."""
    keys = list(whole)
    assert list(got) == keys[: len(got)]
    for key, value in got.items():
        assert value == whole[key], key


# parse_object -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_parse_object_reads_a_complete_object(text: str) -> None:
    assert parse_object(text) == DOCUMENT


def test_a_lone_surrogate_in_the_text_is_read_not_a_bare_type_error() -> None:
    """Fragments joined from parsed JSON strings can hold a lone surrogate, which no UTF-8 can
    hold: the fast parser refuses such a str with a TypeError; Python's json reads it."""
    surrogate = chr(0xD800)
    lone = '{"a": "' + surrogate + '", "b": 1}'
    assert parse_object(lone) == {"a": surrogate, "b": 1}
    assert parse_partial_object(lone[:-1] + ', "c": [1') == {"a": surrogate, "b": 1}


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_parse_object_reads_nothing_as_an_empty_object(text: str) -> None:
    assert parse_object(text) == {}


@pytest.mark.parametrize("text", ["[1, 2]", "1", '"s"', "null", "true", "[]", '[{"a": 1}]'])
def test_parse_object_refuses_json_that_is_not_an_object(text: str) -> None:
    assert parse_object(text) is None


@pytest.mark.parametrize("text", ['{"a": 1', '{"a": 1}}', "{'a': 1}", "nope", '{"a": 1} {"b": 2}'])
def test_parse_object_refuses_what_is_not_exactly_one_object(text: str) -> None:
    assert parse_object(text) is None


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_python_only_constants_are_not_json(constant: str) -> None:
    assert parse_object(f'{{"a": {constant}}}') is None
    assert parse_partial_object(f'{{"ok": 1, "a": {constant}}}') == {"ok": 1}


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"a":' * 100_000,
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"ok": 1, "a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_nesting_too_deep_to_parse_is_refused_not_raised(text: str) -> None:
    assert parse_object(text) is None
    got = parse_partial_object(text)
    assert got in ({}, {"ok": 1})


# parse_partial_object -----------------------------------------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_a_complete_object_comes_back_whole(text: str) -> None:
    assert parse_partial_object(text) == DOCUMENT
    assert parse_partial_object("  " + text + "\n") == DOCUMENT


def test_nothing_gives_an_empty_object() -> None:
    assert parse_partial_object("") == {}
    assert parse_partial_object("   ") == {}


@pytest.mark.parametrize("text", TEXTS)
def test_every_truncation_keeps_only_complete_members_and_never_raises(text: str) -> None:
    previous = 0
    for cut in range(len(text) + 1):
        got = parse_partial_object(text[:cut])
        assert isinstance(got, dict)
        _assert_complete_members_only(got, DOCUMENT)
        assert len(got) >= previous, f"lost members at cut {cut}"
        previous = len(got)
    assert previous == len(DOCUMENT)


def test_a_member_is_kept_once_the_comma_after_it_arrived() -> None:
    text = json.dumps(DOCUMENT)
    items, keys = list(DOCUMENT.items()), list(DOCUMENT)
    for i, (key, value) in enumerate(items[:-1]):
        head = json.dumps(dict(items[: i + 1]))[:-1]  # up to the end of member i's value
        assert text.startswith(head)
        assert list(parse_partial_object(head + ",")) == keys[: i + 1], key
        # before the comma a scalar may still be growing; a closed list or object may not
        before = keys[: i + 1] if isinstance(value, list | dict) else keys[:i]
        assert list(parse_partial_object(head)) == before, key


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"path": "a.txt", "limit": 1', {"path": "a.txt"}),  # the docstring's example
        ('{"path": "a.txt", "limit": 1,', {"path": "a.txt", "limit": 1}),
        ('{"path": "a.txt", "lim', {"path": "a.txt"}),
        ('{"path": "a.txt", "limit":', {"path": "a.txt"}),
        ('{"a": 12', {}),  # the number may still be growing
        ('{"a": "done"', {}),  # so may a member, until the comma or the brace
        ('{"a": 1, "b": [1, 2, 3', {"a": 1}),  # never a shortened list
        ('{"a": 1, "b": [1, 2, 3]', {"a": 1, "b": [1, 2, 3]}),
        ('{"a": 1, "b": {"x": 1, "y": 2', {"a": 1}),  # never a shortened object
        ('{"a": 1, "b": {"x": 1, "y": 2}', {"a": 1, "b": {"x": 1, "y": 2}}),
        ('{"a": "x, \\"y\\", z", "b": "', {"a": 'x, "y", z'}),
        ('{"a": "\\\\", "b": 2', {"a": "\\"}),  # an escaped backslash ends before the quote
        ('{"a": "}", "b": "]"', {"a": "}"}),
        ('{"a": 1}, "trailing"', {"a": 1}),
        ('{"a": 1}{"b": 2}', {"a": 1}),  # two objects glued together: the first
        ("{", {}),
        ('{"', {}),
        ("[1, 2", {}),
        ('[{"a": 1}, {"b": 2', {}),
        ("not json at all, really", {}),
        ("}", {}),
        ("]]]}}},,,", {}),
    ],
)
def test_truncated_objects(text: str, expected: dict[str, Any]) -> None:
    assert parse_partial_object(text) == expected


def test_a_long_object_cut_late_keeps_its_early_members() -> None:
    whole = {f"k{i}": i for i in range(500)}
    text = json.dumps(whole)
    got = parse_partial_object(text[:-5])
    assert len(got) == 499 or len(got) == 498
    _assert_complete_members_only(got, whole)


# Properties ---------------------------------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)
_objects = st.dictionaries(st.text(max_size=6), _values, max_size=6)


@settings(deadline=None)
@given(whole=_objects, data=st.data(), compact=st.booleans())
def test_any_truncation_of_any_object_keeps_only_complete_members(
    whole: dict[str, Any], data: st.DataObject, compact: bool
) -> None:
    text = json.dumps(whole, separators=(",", ":") if compact else None, ensure_ascii=compact)
    cut = data.draw(st.integers(0, len(text)))
    got = parse_partial_object(text[:cut])
    _assert_complete_members_only(got, whole)
    if cut == len(text):
        assert got == whole


@settings(deadline=None)
@given(st.text(alphabet='{}[]",:\\ ab1', max_size=40) | st.text(max_size=40))
def test_any_text_gives_a_dict_and_never_raises(text: str) -> None:
    assert isinstance(parse_partial_object(text), dict)
    result = parse_object(text)
    assert result is None or isinstance(result, dict)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"a": "\\ud800", "b": 1',
            {"a": "\ud800"},
        ),  # jiter refuses a lone surrogate: json reads it
        ('{"a": "x", "b": "\\ud83d", "c', {"a": "x", "b": "\ud83d"}),
        ('{"a": 1, "b": NaN, "c": 2', {"a": 1}),
    ],
)
def test_what_the_partial_parser_refuses_is_read_as_json_reads_it(
    text: str, expected: dict[str, Any]
) -> None:
    assert parse_partial_object(text) == expected


def test_a_long_cut_object_is_recovered_in_one_parse() -> None:
    whole = {f"k{i}": {"v": [i, str(i)]} for i in range(20_000)}
    text = json.dumps(whole)[:-7]
    got = parse_partial_object(text)
    assert len(got) == 19_999
    _assert_complete_members_only(got, whole)
