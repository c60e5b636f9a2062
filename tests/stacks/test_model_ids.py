"""Model ids: ``stack:model``, where the stack is a built-in name or a stack file's path, and
only the model's name goes on the wire."""

from __future__ import annotations

from pathlib import Path

import pytest

import metis
from metis import AdapterConfig, build_adapter
from metis.routing import Router
from metis.stacks.model_ids import split_model_id
from metis.testing.emulator import Emulator


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", ("anthropic", "claude-sonnet-4-5")),
        ("ollama:qwen3:8b", ("ollama", "qwen3:8b")),
        ("custom/my.yaml:claude-sonnet-4-5", ("custom/my.yaml", "claude-sonnet-4-5")),
        ("C:/stacks/my.yml:qwen3:8b", ("C:/stacks/my.yml", "qwen3:8b")),
        ("claude-sonnet-4-5", None),
        (":claude", None),
        ("anthropic:", None),
    ],
)
def test_a_model_id_splits_into_its_stack_and_name(
    model: str, expected: tuple[str, str] | None
) -> None:
    assert split_model_id(model) == expected


@pytest.fixture
def stack_file(tmp_path: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> str:
    path = tmp_path / "custom" / "my.yaml"
    path.parent.mkdir()
    path.write_text("name: my\nextends: anthropic\n")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    return "custom/my.yaml"


def sent_model(emulator: Emulator) -> str:
    model = emulator.requests[-1].json()["model"]
    assert isinstance(model, str)
    return model


@pytest.mark.anyio
async def test_a_stack_file_in_the_model_string_sends_only_the_name(
    stack_file: str, emulator: Emulator
) -> None:
    reply = await metis.acomplete(f"{stack_file}:claude-sonnet-4-5", "Hi", max_output_tokens=50)
    assert reply.text
    assert sent_model(emulator) == "claude-sonnet-4-5"
    await metis.acomplete(f"./{stack_file}:claude-sonnet-4-5", "Hi", max_output_tokens=50)
    assert sent_model(emulator) == "claude-sonnet-4-5"


@pytest.mark.anyio
async def test_a_stack_names_its_models_by_its_name_its_file_or_the_stack_it_extends(
    stack_file: str, emulator: Emulator
) -> None:
    async with build_adapter(stack_file, AdapterConfig(base_url=emulator.url)) as adapter:
        for model in ("my:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"):
            await adapter.complete(
                metis.CanonicalRequest(
                    model=model, messages=[metis.Message.user("Hi")], max_output_tokens=50
                )
            )
            assert sent_model(emulator) == "claude-sonnet-4-5", model


@pytest.mark.anyio
async def test_a_route_to_a_stack_file_sends_only_the_name(
    stack_file: str, emulator: Emulator
) -> None:
    router = Router([f"{stack_file}:claude-sonnet-4-5"])
    try:
        await metis.acomplete(router, "Hi", max_output_tokens=50)
    finally:
        await router.aclose()
    assert sent_model(emulator) == "claude-sonnet-4-5"


def test_a_model_name_with_colons_is_sent_whole() -> None:
    adapter = build_adapter("ollama")
    assert adapter.wire_model("ollama:qwen3:8b") == "qwen3:8b"
    assert adapter.wire_model("qwen3:8b") == "qwen3:8b"
    assert adapter.wire_model("openai:gpt-4o") == "openai:gpt-4o"  # another stack's: refused later
