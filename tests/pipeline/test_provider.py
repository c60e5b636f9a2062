"""The provider: one object per adapter, its parts found by role, one codec, one send path
(docs/engine.md)."""

from __future__ import annotations

import pytest

from metis import build_adapter
from metis.stacks.loader import builtin_stacks


@pytest.mark.parametrize("stack", builtin_stacks())
def test_every_stack_has_a_provider_whose_parts_share_one_codec(stack: str) -> None:
    adapter = build_adapter(stack, api_key="k", base_url="http://localhost:9")
    provider = adapter.pipeline.provider
    assert provider is not None
    roles = [role for role, _ in provider.describe()]
    assert roles.count("encode") == roles.count("reader") == roles.count("framing") == 1
    assert roles.count("transport") == 1
    codec = provider.codec
    for stage in adapter.pipeline:
        if hasattr(stage, "use_codec"):
            assert stage.codec is codec, f"{stack}: {stage.name} reads with a codec of its own"


def test_the_schema_codec_is_built_once_for_an_adapter() -> None:
    adapter = build_adapter("gemini", api_key="k")
    assert adapter.pipeline["normalize"].codec is adapter.pipeline["encode"].codec  # type: ignore[attr-defined]


def test_parts_are_found_by_role_not_by_name() -> None:
    adapter = build_adapter("vertex", api_key="k")
    provider = adapter.pipeline.provider
    assert provider is not None
    assert [name for role, name in provider.describe() if role == "auth"] == [
        "url_params",
        "google_auth",
    ]
    edits = [name for role, name in provider.describe() if role == "edit"]
    assert edits == ["wire_fields", "cache_control", "pre_send_check"]  # Vertex leaves out a field
