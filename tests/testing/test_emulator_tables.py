"""Each row of each rule table (metis/testing/emulator/tables/) refuses its own example: the
table's example request with the row's ``example`` fields set (``null`` removes one, ``{times: n,
of: x}`` stands for a list of n x's), sent to an
emulator, is refused with the row's message (a check's row: with what it ``says``)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from metis.core.config_files import parse_yaml
from metis.errors import ConfigError
from metis.testing.emulator import Emulator, rules
from metis.testing.emulator.rules import LOADED, TABLES, Table

NAMES = sorted(p.stem for p in TABLES.glob("*.yaml") if p.stem != "openai")


def _rows() -> Iterator[tuple[str, int, dict[str, Any]]]:
    for name in NAMES:
        for index, row in enumerate(LOADED[name].every_row()):
            yield name, index, row


ROWS = {f"{name}-{index}": (name, row) for name, index, row in _rows()}


def _expected(reader: Table, row: dict[str, Any]) -> re.Pattern[str]:
    """The message the row refuses with: a check's words, or the rule's message with each
    ``{...}`` placeholder standing for any text."""
    if "check" in row:
        return re.compile(".*" + re.escape(row["says"]) + ".*", re.S)
    message = reader.rule(row).message
    pieces = re.split(r"(?<!\{)\{[^{}]*\}(?!\})", message)
    escaped = [re.escape(p.replace("{{", "{").replace("}}", "}")) for p in pieces]
    return re.compile(".*".join(escaped), re.S)


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(transport=Emulator().transport(), base_url="http://emulator") as client:
        yield client


def test_every_rule_row_has_an_example() -> None:
    """A rule row without an example would have no test; a check's row may lean on the
    checks' own tests (tests/testing/test_emulator_rules.py)."""
    bare = [key for key, (_, row) in ROWS.items() if "check" not in row and "example" not in row]
    assert not bare


@pytest.mark.parametrize("key", sorted(k for k, (_, row) in ROWS.items() if "example" in row))
def test_each_row_refuses_its_example(http: httpx.Client, key: str) -> None:
    name, row = ROWS[key]
    reader = LOADED[name]
    request = reader.data["example"]
    body = copy.deepcopy(request["body"])
    for field, value in row["example"].items():
        if value is None:
            body.pop(field, None)
        elif isinstance(value, dict) and set(value) == {"times", "of"}:
            body[field] = [value["of"]] * value["times"]
        else:
            body[field] = value
    response = http.post(request["path"], json=body, headers=request["headers"])
    assert response.status_code == row.get("status", 400), response.text
    error = response.json().get("error", response.json())
    message = error if isinstance(error, str) else error.get("message")
    assert _expected(reader, row).fullmatch(str(message)), (row, message)


def test_every_table_is_read_and_has_an_example_request() -> None:
    """Each table but the shared ``openai.yaml`` is a format's, read when the formats load."""
    assert sorted(LOADED) == NAMES
    assert all("example" in LOADED[name].data for name in NAMES)


def test_the_example_requests_are_accepted(http: httpx.Client) -> None:
    for name in NAMES:
        request = LOADED[name].data["example"]
        response = http.post(request["path"], json=request["body"], headers=request["headers"])
        assert response.status_code == 200, (name, response.text)


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ("- {at: model, test: text, message: m, colour: red}", "unknown keys ['colour']"),
        ("- {at: model, test: texty, message: m}", "unknown test 'texty'"),
        ("- {at: model, test: {longer than: 3}, message: m}", "unknown test 'longer than'"),
        ("- {check: tool pairs}", "the checks named and given differ: ['tool pairs']"),
        ("- {check: tool pairs, exmaple: {}}", "a check row with unknown keys"),
    ],
)
def test_a_wrong_table_is_a_config_error_naming_it(
    rows: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wrong.yaml").write_text(f"rules:\n{rows}\n", encoding="utf-8")
    monkeypatch.setattr(rules, "TABLES", tmp_path)
    with pytest.raises(ConfigError, match=r"tables/wrong\.yaml: .*" + re.escape(problem)):
        rules.table("wrong")


@pytest.mark.parametrize("path", sorted(TABLES.glob("*.yaml")), ids=lambda p: p.name)
def test_a_table_reads_the_same_without_libyaml(path: Path) -> None:
    """PyYAML's own parser (where libyaml is not built in) reads what libyaml reads: the two
    differ on a few plain scalars (``and?`` in a flow mapping)."""
    text = path.read_text(encoding="utf-8")
    assert yaml.load(text, Loader=yaml.SafeLoader) == parse_yaml(text, str(path))
