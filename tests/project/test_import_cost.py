"""What importing metis and building an adapter loads (benchmarks/README.md, "import"): the
packages whose names are imported on first use hand out every public name, and an adapter
built with the defaults loads no module it does not use before its first call."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest

STACKS = ("anthropic", "openai", "openai_responses", "gemini", "ollama")

# One interpreter answers every probe below, each in a child forked from it: the first before
# anything of metis is imported, the others after ``from metis import AdapterConfig,
# build_adapter``, which each of them starts with; a child starts as a fresh interpreter would
# (seven interpreters for seven probes took several times the CPU). Without fork, each probe
# gets an interpreter of its own. ``canonical_model_alone`` comes first in the answers.
PROBES = """
import json, os, sys


def canonical_model_alone():
    import metis.model.knobs
    return sorted(m for m in sys.modules if "metis.model" in m)


def stacks_one_after_another(*stacks):
    from metis import AdapterConfig, build_adapter
    loaded = {}
    for stack in stacks:
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
    return {"all": sorted(sys.modules), "per_stack": loaded, "built": built}


def codec_packages(stack):
    from metis import AdapterConfig, build_adapter

    def packages():
        return sorted({m.split(".")[2] for m in sys.modules
                       if m.startswith("metis.wire.") and m.count(".") >= 2})

    adapter = build_adapter(stack, AdapterConfig(api_key="x"))
    built = packages()
    adapter.pipeline  # its stages and its codec, as its first call builds them
    return {"built": built, "used": packages(), "factories": builtin_factories()}


def builtin_factories():
    import pydantic
    return sorted(
        f"{model.__module__}.{model.__name__}.{name}"
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("metis")
        for model in vars(module).values()
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel)
        for name, field in model.model_fields.items()
        if field.default_factory in (list, dict, tuple, set)
    )


def in_a_child(probe, *args):
    if not hasattr(os, "fork"):
        return probe(*args)
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(readable)
        with os.fdopen(writable, "w") as out:
            json.dump(probe(*args), out)
        os._exit(0)
    os.close(writable)
    with os.fdopen(readable) as answer:
        found = json.load(answer)
    assert os.waitpid(pid, 0)[1] == 0
    return found


probes = json.loads(sys.argv[1])
first = [probe for probe in probes if probe[0] == "canonical_model_alone"]
answers = [in_a_child(canonical_model_alone) for _ in first]
from metis import AdapterConfig, build_adapter  # what every other probe starts with
rest = [probe for probe in probes if probe[0] != "canonical_model_alone"]
answers += [in_a_child(globals()[name], *args) for name, *args in rest]
print(json.dumps(answers))
"""


def probed(*probes: list[str]) -> list[Any]:
    """What each probe (a function of PROBES and its arguments) returns, in a fresh interpreter
    (a forked child of one, where there is fork)."""
    if hasattr(os, "fork"):
        return run_probes(list(probes))
    return [run_probes([probe])[0] for probe in probes]


def run_probes(probes: list[list[str]]) -> list[Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBES, json.dumps(probes)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return list(json.loads(done.stdout))


@pytest.fixture(scope="module")
def probes() -> dict[str, Any]:
    """Every probe this module asks, asked of one interpreter."""
    alone, together, *codecs = probed(
        ["canonical_model_alone"],
        ["stacks_one_after_another", *STACKS],
        *(["codec_packages", stack] for stack in STACKS),
    )
    return {"alone": alone, "together": together, "codecs": dict(zip(STACKS, codecs, strict=True))}


@pytest.fixture(scope="module")
def loaded(probes: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = probes["together"]["per_stack"]
    found["all"] = probes["together"]["all"]
    found["built"] = probes["together"]["built"]
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


def test_one_module_of_the_canonical_model_loads_alone(probes: dict[str, Any]) -> None:
    assert probes["alone"] == ["metis.model", "metis.model.base", "metis.model.knobs"]


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


def test_adapters_of_five_stacks_in_one_interpreter_load_no_bedrock_codec(
    loaded: dict[str, list[str]],
) -> None:
    assert [name for name in loaded["all"] if name.startswith("metis.wire.bedrock")] == []


def test_building_an_adapter_leaves_the_async_locks_to_its_first_call(
    loaded: dict[str, list[str]],
) -> None:
    assert "anyio._core._synchronization" not in loaded["all"]


def test_the_models_an_adapter_builds_take_no_default_factory_of_a_builtin(
    loaded: dict[str, list[str]],
) -> None:
    """pydantic reads a default factory's signature as it builds the class; a builtin's
    (``list``, ``dict``) is parsed from its text signature by ``tokenize``, whose patterns
    compile on first use (~8 ms of CPU). These models take a plain ``[]`` or ``{}``, or, made
    per call, a factory of metis's own (metis/core/empty.py)."""
    assert loaded["built"]
    for name in loaded["built"]:
        module, _, attr = name.rpartition(".")
        model = getattr(importlib.import_module(module), attr)
        factories = {f: i.default_factory for f, i in model.model_fields.items()}
        assert not {f for f, made in factories.items() if made in (list, dict, tuple, set)}, name


@pytest.mark.parametrize("stack", STACKS)
def test_nor_the_models_its_first_use_loads(stack: str, probes: dict[str, Any]) -> None:
    assert probes["codecs"][stack]["factories"] == []


def test_building_an_adapter_leaves_asyncio_to_the_loop_that_calls(
    loaded: dict[str, list[str]],
) -> None:
    """The adapter's own clients are kept per event loop (metis/transport/loop_clients.py):
    a loop that calls has imported asyncio (or trio) already; building imports neither."""
    assert not {"asyncio", "anyio.lowlevel", "trio"} & set(loaded["all"])


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
def test_an_adapter_loads_only_the_codec_packages_of_its_own_stack(
    stack: str, probes: dict[str, Any]
) -> None:
    built, used = (
        [name for name in probes["codecs"][stack][when] if name in CODECS]
        for when in ("built", "used")
    )
    assert used == CODEC_PACKAGES[stack]
    assert set(built) <= set(used)  # a codec given settings is built with the adapter


@pytest.mark.parametrize("stack", STACKS)
def test_building_an_adapter_leaves_the_stages_and_the_model_to_its_first_use(
    stack: str, loaded: dict[str, list[str]]
) -> None:
    """The stack is checked with the stages' options models (metis/stages/options.py) and
    the codec's settings checks: no stage's code, no content block, request or event class,
    no engine loads until the pipeline is first used (the stacks are built one after the
    other, none of them loading these, so each stack's own list is whole)."""
    found = set(loaded[stack])
    assert not {m for m in found if m.startswith("metis.stages.")} - {"metis.stages.options"}
    assert not {"metis.model.content", "metis.model.request", "metis.model.events"} & found
    assert not {"metis.pipeline.pipeline", "metis.transport.exchange", "httpcore"} & found


@pytest.mark.parametrize("stack", ["gemini", "openai_responses"])
def test_a_built_in_stacks_own_codec_settings_are_checked_by_its_codec_on_first_use(
    stack: str, loaded: dict[str, list[str]]
) -> None:
    """Its file's settings are package data held valid (tests/stacks/test_deferred.py):
    neither the schema codec's settings models nor Responses' settings check load to build."""
    assert not {"metis.wire.schema.settings", "metis.wire.responses_settings"} & set(loaded[stack])


@pytest.mark.parametrize("stack", ["anthropic", "openai", "ollama"])
def test_a_codec_given_no_settings_loads_with_the_first_use(
    stack: str, probes: dict[str, Any]
) -> None:
    assert not [name for name in probes["codecs"][stack]["built"] if name in CODECS]
