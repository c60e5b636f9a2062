"""``metis models`` lists a model's maker before the platforms and resellers serving it."""

from __future__ import annotations

import json

import pytest

from metis.catalog.first_party import family_of


@pytest.mark.parametrize(
    ("model_id", "family"),
    [
        ("claude-sonnet-4-5", "claude"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude"),
        ("anthropic/claude-sonnet-4.5", "claude"),
        ("claude-sonnet-4-5@20250929", "claude"),
        ("gpt-4o", "gpt"),
        ("o3-mini", "o3"),
        ("ft:gpt-4o", "gpt"),
        ("text-embedding-3-small", "text-embedding"),
        ("qwen3-max", "qwen"),
        ("GLM-4.6", "glm"),
        ("amazon.nova-pro-v1:0", "nova"),
        ("meta.llama3-70b-instruct-v1:0", "llama"),
        ("databricks-claude-sonnet-4-5", None),
    ],
)
def test_a_models_family_is_read_from_its_name(model_id: str, family: str | None) -> None:
    assert family_of(model_id) == family


@pytest.mark.parametrize(
    ("search", "maker"),
    [("sonnet-4-5", "anthropic"), ("gpt-4o", "openai"), ("gemini-2.5-flash", "google")],
)
def test_metis_models_lists_the_makers_entries_first(
    search: str, maker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from metis.cli import main

    assert main(["models", search, "--json", "--limit", "500"]) == 0
    providers = [json.loads(line)["provider"] for line in capsys.readouterr().out.splitlines()]
    assert maker in providers and providers[0] == maker
    makers = [p == maker for p in providers]
    assert makers == sorted(makers, reverse=True)  # every entry of the maker before the others
    assert len(set(providers)) > 3  # and the resellers are still there
