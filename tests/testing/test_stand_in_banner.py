"""The examples' first line says where each provider's calls go: a key alone is the real API,
a key with the SDK's base URL variable is whatever that variable names (the emulator a reader
started from README.md's "Try it"), no key is the emulator the example started."""

from __future__ import annotations

import pytest

from metis.testing import stand_in


def banner(capsys: pytest.CaptureFixture[str], *providers: str) -> str:
    with stand_in(*providers):
        pass
    return capsys.readouterr().out.strip()


@pytest.fixture(autouse=True)
def no_provider_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC", "OPENAI", "GOOGLE_GEMINI", "GEMINI"):
        monkeypatch.delenv(f"{name}_API_KEY", raising=False)
        monkeypatch.delenv(f"{name}_BASE_URL", raising=False)


def test_a_key_pointed_elsewhere_by_the_sdks_variable_is_not_called_the_real_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-emulator")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8900")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    assert banner(capsys, "anthropic", "openai") == (
        "backends: real API for openai (OPENAI_API_KEY); "
        "anthropic at http://127.0.0.1:8900 (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY)"
    )


def test_gemini_names_the_variable_its_sdk_reads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "sk-emulator")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:8900")
    out = banner(capsys, "gemini", "anthropic")
    assert out.startswith(
        "backends: gemini at http://127.0.0.1:8900 (GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY); "
        "emulator at http://127.0.0.1:"
    )
    assert out.endswith(" for anthropic")


def test_a_provider_it_does_not_stand_in_for_is_a_config_error_naming_those_it_does() -> None:
    """Not a bare KeyError, and refused before an emulator is started for it."""
    from metis.errors import ConfigError
    from metis.testing.emulator.stand_in import StandIn

    refused = r"stand_in\('bedrock'\): it stands in for anthropic"
    with pytest.raises(ConfigError, match=refused), stand_in("anthropic", "bedrock"):
        pass
    with pytest.raises(ConfigError, match="did you mean 'gemini'"):
        StandIn(None).is_real("gemni")
