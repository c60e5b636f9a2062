"""``@metis.tool`` keeps the function's type for type checkers, and a session's run its
``output_type``'s: mypy checks a user's snippet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api

SNIPPET = '''
from typing import assert_type

from pydantic import BaseModel

import metis
from metis.tools import Tool


@metis.tool
def get_weather(city: str, days: int = 1) -> str:
    """Current weather for a city."""
    return f"18 C in {city}"


@metis.tool(name="lookup", description="Look a key up.")
async def lookup(key: str) -> dict[str, int]:
    return {key: 1}


class City(BaseModel):
    name: str


assert_type(get_weather("Paris"), str)
assert_type(get_weather("Paris", days=2), str)


async def awaited() -> None:
    assert_type(await lookup("k"), dict[str, int])


assert_type(Tool.from_model(City)(name="Oslo"), City)
assert_type(get_weather.definition.name, str)
get_weather(3)  # type: ignore[arg-type]
get_weather("Paris", weeks=2)  # type: ignore[call-arg]
reply = metis.complete("openai:gpt-4o", "Weather?", tools=[get_weather, lookup])
metis.run_tools(reply, [get_weather])

session = metis.Session("openai:gpt-4o", tools=[get_weather])
TOOLS: list[metis.AnyTool] = [get_weather, lookup]  # unannotated, mypy joins them to object
metis.Session("openai:gpt-4o", tools=TOOLS)
metis.run_tools(reply, TOOLS)
MIXED: list[metis.ToolLike] = [get_weather, metis.WebSearch(max_uses=3), len]
metis.complete("openai:gpt-4o", "Weather?", tools=MIXED)
metis.Session("openai:gpt-4o", tools=MIXED)
metis.run_tools(reply, MIXED)
NOT_TOOLS: list[metis.ToolLike] = ["get_weather"]  # type: ignore[list-item]
metis.Sesion("openai:gpt-4o")  # type: ignore[attr-defined]
metis.histories.from_openai_chat([{"role": "user", "content": "Hi"}])
from metis.testing import Emulatr  # type: ignore[attr-defined]
from metis.pipeline import Stge  # type: ignore[attr-defined]
from metis.model import Mesage  # type: ignore[attr-defined]
from metis.telemetry import LogSink  # type: ignore[attr-defined]
from metis.catalog import Catalg  # type: ignore[attr-defined]
from metis.registry import Registy  # type: ignore[attr-defined]
from metis.registry.registry import Registy as Registy2  # type: ignore[attr-defined]
assert_type(session.run("A city?", output_type=City).output, City | None)
assert_type(session.run("Weather?").output, None)


async def ran() -> None:
    assert_type((await session.arun("A city?", output_type=City)).output, City | None)
'''


def test_a_decorated_tool_keeps_its_signature_and_return_type(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Before, ``@metis.tool`` returned ``Any``: every ``assert_type`` failed, and the two
    ignores (a wrong argument, an unknown one) were reported as unused. A misspelt name of
    ``metis`` or of its lazy subpackages (``metis.Sesion``, ``from metis.model import Mesage``)
    was ``Any`` to mypy, through their ``__getattr__``: its ignore was reported as unused,
    and ``list[metis.AnyTool]``, a name ``metis`` did not have, passed as ``Any``. A list of
    tools and the provider's (``metis.WebSearch``) had no public type: ``metis.ToolLike``."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(SNIPPET), encoding="utf-8")
    root = request.config.rootpath
    # The project's own mypy cache, with the project's settings, as `mypy metis examples` (CI's
    # step before the tests) leaves it: only the snippet is checked. In pytest's cache instead,
    # a fresh clone's first run checked metis and its dependencies again (6 s of CPU).
    kept = getattr(request.config, "cache", None)  # none under -p no:cacheprovider
    cache = root / ".mypy_cache" if kept else tmp_path / "cache"
    out, err, status = api.run(
        [
            "--config-file",
            str(root / "pyproject.toml"),
            "--strict",
            "--warn-unused-ignores",
            "--no-error-summary",
            "--cache-dir",
            str(cache),
            "--python-version",
            "3.11",
            str(snippet),
        ]
    )
    assert status == 0, out + err
