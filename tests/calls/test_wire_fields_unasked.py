"""A user stack's ``wire_fields`` ``drop`` of a field the encoder writes whatever the caller
set (the Responses API's ``store``, each Chat tool's ``parameters``) is left out quietly: only a
setting the caller made is reported dropped (docs/contract.md §13). The same path is reported
when the caller's own setting put a value there (``store`` given in ``provider_options``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from metis import AdapterConfig, build_adapter
from metis.model import CanonicalRequest, Message
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator

from ..conversations import TOOLS
from ..helpers import answer


def user_stack(folder: Path, extends: str, drop: list[str]) -> Path:
    stack = {
        "name": "mine",
        "extends": extends,
        "stages": {"insert_after": {"encode": [{"wire_fields": {"drop": drop}}]}},
    }
    path = folder / "mine.yaml"
    path.write_text(yaml.safe_dump(stack), encoding="utf-8")
    return path


async def warnings_of(path: Path, model: str, streaming: bool, **fields: Any) -> list[str]:
    emulator = Emulator(models="any")
    adapter = build_adapter(
        path,
        AdapterConfig(api_key="test-key", http_client=emulator.client()),
        tool_id_store=InMemoryToolIdStore(),
    )
    request = CanonicalRequest(
        model=f"mine:{model}",
        messages=[Message.user("Weather in Paris?")],
        max_output_tokens=256,
        **fields,
    )
    response = await answer(adapter, request, streaming)
    return [w.block_type for w in response.warnings]


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_field_the_encoder_always_writes_is_dropped_quietly(
    tmp_path: Path, streaming: bool
) -> None:
    path = user_stack(tmp_path, "openai_responses", ["store", "temperature"])
    assert await warnings_of(path, "gpt-4.1", streaming) == []


@pytest.mark.anyio
async def test_the_callers_setting_at_that_path_is_reported(tmp_path: Path) -> None:
    path = user_stack(tmp_path, "openai_responses", ["store", "temperature"])
    options = {"openai_responses": {"store": False}}
    found = await warnings_of(path, "gpt-4.1", False, temperature=0.5, provider_options=options)
    assert found == ["store", "temperature"]


@pytest.mark.anyio
async def test_a_part_of_every_tool_the_encoder_writes_is_dropped_quietly(
    tmp_path: Path,
) -> None:
    path = user_stack(tmp_path, "openai", ["tools.*.function.parameters", "seed"])
    assert await warnings_of(path, "gpt-4o", False, tools=TOOLS) == []
    assert await warnings_of(path, "gpt-4o", False, tools=TOOLS, seed=7) == ["seed"]
