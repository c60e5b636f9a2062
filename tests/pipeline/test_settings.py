"""Typed settings per stack (docs/engine.md): validated when the adapter is built, unknown
keys refused with the nearest valid one named, given to the stages that read them, taken by
build_adapter, AdapterConfig, models.yaml and the one-line calls."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import metis
from metis import AdapterConfig, build_adapter
from metis.errors import ConfigError
from metis.pipeline.settings import (
    BedrockSettings,
    NoSettings,
    OllamaSettings,
    ProviderSettings,
    VertexSettings,
    register_settings,
)
from metis.registry import Registry
from metis.stacks.loader import load_stack, parse_stack

pytestmark = pytest.mark.backend_independent


@pytest.mark.parametrize(
    ("stack", "kind"),
    [
        ("bedrock", BedrockSettings),
        ("bedrock_anthropic", BedrockSettings),
        ("bedrock_mantle", BedrockSettings),
        ("vertex", VertexSettings),
        ("ollama", OllamaSettings),
        ("anthropic", NoSettings),
    ],
)
def test_each_stack_names_its_kind_of_settings(stack: str, kind: type[ProviderSettings]) -> None:
    adapter = build_adapter(stack, api_key="k", base_url="http://localhost:9")
    assert type(adapter.settings) is kind


def test_a_misspelt_setting_is_a_config_error_naming_the_nearest_valid_one() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'regoin' \(did you mean 'region'\?\)"):
        build_adapter("bedrock", settings={"regoin": "eu-west-1"})
    with pytest.raises(ConfigError, match=r"unknown setting .region.*its settings: none"):
        build_adapter("anthropic", settings={"region": "eu-west-1"})


def test_a_value_that_could_change_the_url_is_refused_when_the_adapter_is_built() -> None:
    for bad in ("eu-west-1/evil", "eu-west-1#", "eu west", "a?b=c"):
        with pytest.raises(ConfigError, match="setting 'region'"):
            build_adapter("bedrock", settings={"region": bad})


def test_settings_reach_the_stages_that_read_them() -> None:
    adapter = build_adapter("bedrock", settings=BedrockSettings(region="eu-west-1"))
    assert adapter.settings == BedrockSettings(region="eu-west-1")
    assert adapter.pipeline["aws_endpoint"]._options == {"region": "eu-west-1"}  # type: ignore[attr-defined]
    ollama = build_adapter("ollama", settings={"num_ctx": None, "keep_alive": "5m"})
    encode = ollama.pipeline["encode"]
    assert encode.codec._knobs == {"num_ctx": None, "keep_alive": "5m"}  # type: ignore[attr-defined]


def test_options_still_work_as_a_deprecated_alias() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        adapter = build_adapter("vertex", AdapterConfig(options={"project": "p"}))
        assert adapter.settings == VertexSettings(project="p")
        with pytest.raises(ConfigError, match="did you mean 'project'"):
            build_adapter("vertex", AdapterConfig(options={"projet": "p"}))
    with pytest.raises(ConfigError, match="settings or options"):
        build_adapter("vertex", AdapterConfig(options={"project": "p"}, settings={"project": "q"}))


def test_a_models_yaml_adapter_with_options_is_read_as_settings_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("metis.core.deprecation._warned", set())
    yaml = {"adapters": {"local": {"type": "ollama", "options": {"model": "qwen3:8b"}}}}
    with pytest.warns(DeprecationWarning, match="`options:` in models.yaml .* use `settings:`"):
        adapter = Registry.from_dict(yaml).adapter("local")
    assert adapter.settings == OllamaSettings(model="qwen3:8b")
    both = {"type": "ollama", "options": {"model": "a"}, "settings": {"model": "b"}}
    with pytest.raises(ConfigError, match="settings or options"):
        Registry.from_dict({"adapters": {"local": both}}).adapter("local")


def test_the_old_names_of_cloud_credentials_are_still_taken() -> None:
    def token() -> str:
        return "t"

    azure = build_adapter("azure", settings={"azure_ad_token_provider": token})
    assert azure.settings.value("token_provider") is token


def test_a_stack_names_a_known_kind() -> None:
    stack = {
        "name": "x",
        "codec": "openai_chat",
        "settings": "bedrok",
        "endpoint": {"base_url": "http://x", "path": "/v1"},
        "stages": ["tool_ids"],
    }
    with pytest.raises(ConfigError, match="unknown kind 'bedrok'"):
        parse_stack(stack, "x.yaml")


def test_a_kind_of_your_own_can_be_registered() -> None:
    class TenantSettings(ProviderSettings):
        tenant: str | None = None

    register_settings("tenant_test", TenantSettings)
    stack = parse_stack(
        {
            "name": "x",
            "codec": "openai_chat",
            "settings": "tenant_test",
            "endpoint": {"base_url": "http://x/{tenant}", "path": "/v1"},
            "stages": [
                "tool_ids",
                {"url_params": {"params": {"tenant": ["X_TENANT"]}}},
            ],
        }
    )
    adapter = build_adapter(stack, settings={"tenant": "acme"})
    assert adapter.settings.value("tenant") == "acme"


def test_models_yaml_takes_settings(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "adapters:\n"
        "  aws: {type: bedrock, settings: {region: eu-west-1}}\n"
        "models:\n"
        "  bedrock:us.amazon.nova-micro-v1:0: {adapter: aws}\n",
        encoding="utf-8",
    )
    registry = Registry.load(path)
    adapter = registry.adapter("bedrock:us.amazon.nova-micro-v1:0")
    assert adapter.settings == BedrockSettings(region="eu-west-1")


def test_a_misspelt_setting_in_models_yaml_is_refused_when_the_file_loads(tmp_path: Path) -> None:
    """Not at the first call (where `metis serve` would answer every request with a 500)."""
    path = tmp_path / "models.yaml"
    path.write_text(
        "adapters:\n"
        "  aws: {type: bedrock, settings: {regoin: eu-west-1}}\n"
        "models:\n"
        "  bedrock:us.amazon.nova-micro-v1:0: {adapter: aws}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        Registry.load(path)
    assert str(caught.value).startswith(f"{path}: adapters.aws.settings: unknown setting 'regoin'")
    assert "did you mean 'region'?" in str(caught.value)


@pytest.mark.anyio
async def test_a_one_line_call_takes_settings_and_refuses_a_misspelt_one() -> None:
    with pytest.raises(ConfigError, match="did you mean 'region'"):
        await metis.acomplete(
            "bedrock:us.amazon.nova-micro-v1:0", "hi", api_key="k", settings={"regoin": "x"}
        )


def test_the_kinds_the_docs_list_are_the_kinds_there_are() -> None:
    text = (Path(__file__).parents[2] / "docs" / "engine.md").read_text(encoding="utf-8")
    kinds: dict[str, Any] = {
        "bedrock": BedrockSettings,
        "vertex": VertexSettings,
        "ollama": OllamaSettings,
    }
    for kind, model in kinds.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{kind}` |"))
        for field in model.model_fields:
            assert f"`{field}`" in row, (kind, field)
    assert load_stack("azure").settings == "azure"
