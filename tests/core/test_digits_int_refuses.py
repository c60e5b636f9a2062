"""Text read as a number is checked for ASCII digits: ``"²".isdigit()`` is true though
``int("²")`` is a ValueError, so a check by ``isdigit()`` alone let a superscript through to
a bare ValueError (or argparse's "invalid _port value"). Each place now says what it wanted."""

from __future__ import annotations

import pytest

from metis.cli import build_parser
from metis.cli.output import CliError
from metis.errors import ConfigError, StackError
from metis.pipeline.request import WireRequest
from metis.redis.target import nodes_of
from metis.stages.edits.wire_fields import WireFields
from metis.testing.emulator import Emulator
from metis.testing.emulator.cli import _parser as emulator_parser
from metis.wire.schema.paths import compile_path

SUPERSCRIPT = "²"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--config", "m.yaml", "--port", SUPERSCRIPT], "expected a port"),
        (["serve", "--config", "m.yaml", "--workers", SUPERSCRIPT], "expected a whole number"),
    ],
)
def test_the_cli_says_what_it_expected_of_a_superscript(argv: list[str], said: str) -> None:
    with pytest.raises(CliError, match=f"{said}.*'²'"):  # before: "invalid _port value"
        build_parser().parse_args(argv)


def test_the_emulator_cli_says_what_it_expected_of_a_superscript_port() -> None:
    with pytest.raises(Exception, match="expected a port from 0 to 65535, got '²'"):
        emulator_parser().parse_args(["--port", SUPERSCRIPT])


def test_a_redis_node_with_a_superscript_port_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="is not host:port"):
        nodes_of([f"redis.local:{SUPERSCRIPT}"], 6379)


def test_a_schema_path_step_of_a_superscript_is_a_key() -> None:
    assert compile_path(f"a.{SUPERSCRIPT}.-{SUPERSCRIPT}") == ("a", SUPERSCRIPT, f"-{SUPERSCRIPT}")
    assert compile_path("a.0.-1") == ("a", 0, -1)
    with pytest.raises(StackError):
        compile_path("a..b")


def test_a_wire_fields_step_of_a_superscript_indexes_no_list() -> None:
    body = {"tools": [{"strict": True}, {"strict": True}, {"strict": True}]}
    request = WireRequest(url="https://llm.example/v1/chat/completions", body=body, stream=False)
    stage = WireFields(drop=[f"tools.{SUPERSCRIPT}.strict"], set={f"tools.{SUPERSCRIPT}.a": 1})
    assert stage.apply(request).body == body


@pytest.mark.anyio
async def test_the_emulators_gemini_cache_refuses_a_superscript_as_gemini_would() -> None:
    async with Emulator().client() as client:
        base = "http://emulator/v1beta/cachedContents"
        listed = await client.get(f"{base}?pageSize={SUPERSCRIPT}", headers={"x-goog-api-key": "k"})
        assert listed.status_code == 400 and "Invalid pageSize" in listed.text, listed.text
        contents = [{"role": "user", "parts": [{"text": "hi"}]}]
        body = {"model": "models/gemini-2.5-flash", "contents": contents, "ttl": f"{SUPERSCRIPT}s"}
        made = await client.post(base, json=body, headers={"x-goog-api-key": "k"})
        assert made.status_code == 400 and "Illegal duration format" in made.text, made.text
