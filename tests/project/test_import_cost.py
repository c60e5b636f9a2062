"""What importing metis and building an adapter loads (benchmarks/README.md, "import"): the
packages whose names are imported on first use hand out every public name, and an adapter
built with the defaults loads no module it does not use before its first call."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

STACKS = ("anthropic", "openai", "openai_responses", "gemini", "ollama")

PROBE = """
import json, sys
from metis import AdapterConfig, build_adapter
loaded = {}
for stack in sys.argv[1:]:
    before = set(sys.modules)
    build_adapter(stack, AdapterConfig(api_key="x"))
    loaded[stack] = sorted(set(sys.modules) - before)
import pydantic
built = sorted(
    f"{model.__module__}.{model.__name__}"
    for module in list(sys.modules.values())
    if getattr(module, "__name__", "").startswith("metis")
    for model in vars(module).values()
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel)
    and model.__module__ == module.__name__ and model.__pydantic_complete__
)
print(json.dumps({"all": sorted(sys.modules), "per_stack": loaded, "built": built}))
"""


@pytest.fixture(scope="module")
def loaded() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *STACKS],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found: dict[str, list[str]] = json.loads(done.stdout)["per_stack"]
    found["all"] = json.loads(done.stdout)["all"]
    found["built"] = json.loads(done.stdout)["built"]
    return found


@pytest.mark.parametrize("package", ["metis", "metis.catalog", "metis.model", "metis.telemetry"])
def test_a_lazy_package_hands_out_every_name_it_lists(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        module.Nonesuch  # noqa: B018


def test_the_default_sink_loads_neither_the_bus_events_nor_the_other_sinks(
    loaded: dict[str, list[str]],
) -> None:
    assert {m for m in loaded["all"] if m.startswith("metis.telemetry.")} == {
        "metis.telemetry.sink"
    }


def test_one_module_of_the_canonical_model_loads_alone() -> None:
    probe = (
        "import sys, metis.model.knobs; print(sorted(m for m in sys.modules if 'metis.model' in m))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["['metis.model',", "'metis.model.knobs']"]


def test_an_adapter_reads_the_model_catalog_with_its_first_call_not_when_built(
    loaded: dict[str, list[str]],
) -> None:
    assert not {"metis.catalog.catalog", "metis.catalog.entries", "metis.catalog.lookup"} & set(
        loaded["all"]
    )


def test_an_adapter_builds_the_validator_of_its_own_settings_kind_only(
    loaded: dict[str, list[str]],
) -> None:
    kinds = {name for name in loaded["built"] if name.startswith("metis.pipeline.settings.")}
    assert kinds == {  # anthropic, openai, openai_responses and gemini take none; ollama its own
        "metis.pipeline.settings.NoSettings",
        "metis.pipeline.settings.OllamaSettings",
    }


def test_building_an_adapter_leaves_the_async_locks_to_its_first_call(
    loaded: dict[str, list[str]],
) -> None:
    assert "anyio._core._synchronization" not in loaded["all"]


def test_the_nearest_name_helper_loads_with_the_first_misspelt_name(
    loaded: dict[str, list[str]],
) -> None:
    assert "difflib" not in loaded["all"]


CODECS = {"anthropic", "bedrock_converse", "ollama", "openai_chat", "openai_responses", "schema"}
CODEC_PACKAGES = {
    "anthropic": ["anthropic"],
    "openai": ["openai_chat"],
    "openai_responses": ["openai_chat", "openai_responses"],  # it shares Chat's helpers
    "gemini": ["schema"],
    "ollama": ["ollama"],
}


@pytest.mark.parametrize("stack", STACKS)
def test_an_adapter_loads_only_the_codec_packages_of_its_own_stack(stack: str) -> None:
    probe = (
        "import sys\n"
        "from metis import AdapterConfig, build_adapter\n"
        f"build_adapter({stack!r}, AdapterConfig(api_key='x'))\n"
        "print(' '.join(sorted({m.split('.')[2] for m in sys.modules"
        " if m.startswith('metis.wire.') and m.count('.') >= 2})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = [name for name in done.stdout.split() if name in CODECS]
    assert loaded == CODEC_PACKAGES[stack]
